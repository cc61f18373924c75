"""BatchWriter: buffered, background writing with bounded memory.

Producers call write(); a background thread sends the buffered points with
Client.write when ``batch_size`` points are waiting, when the oldest
buffered point has waited ``flush_interval`` seconds, on flush(), and on
close(). The buffer holds at most ``max_buffered_points``: when it is full,
write() blocks until the sender makes room (backpressure), or raises
BufferFull after ``block_timeout`` seconds.

Failure model: each send is retried by the client's RetryPolicy. When a send
fails for good, the writer stops sending and every point it did not get
acknowledged -- the failed batch and everything buffered behind it -- is
handed back in BatchWriterError.unsent, raised by the next write(),
flush() or close(). Nothing is dropped silently. (A failed batch may have
been partly stored; resending it is harmless, as a duplicate timestamp is
last-write-wins with the same value.)

Concurrency: write(), flush() and close() may be called from any number of
threads. Points are sent in the order write() buffered them.

If the program exits without close(), an atexit hook closes every open
writer, so buffered points are still sent (or reported on stderr).
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import threading
import time
import weakref
from collections import abc
from typing import TYPE_CHECKING, Deque, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from .errors import BatchWriterError, BufferFull, ClientClosed, DeadlineExceeded, InvalidArgument, TributaryError
from .model import Point, SeriesBatch, Timestamp, WriteResult, series_labels, to_ms, to_value
from .selector import METRIC_NAME

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["BatchWriter"]

_open_writers: "weakref.WeakSet[BatchWriter]" = weakref.WeakSet()


@atexit.register
def _close_open_writers() -> None:
    for w in list(_open_writers):
        try:
            w.close()
        except TributaryError as e:  # pragma: no cover - exit path
            import sys

            print("tributary: batch writer at exit: %s" % e, file=sys.stderr)


class BatchWriter:
    """Buffers points and writes them in batches in the background.

    Use it as a context manager, or call close() when done::

        with client.batch_writer(batch_size=5000, flush_interval=1.0) as w:
            for reading in sensor():
                w.add("temp", {"room": "a"}, reading.ms, reading.celsius)
        print(w.result.accepted)

    Args:
        client: the Client to send with.
        batch_size: send when this many points are buffered (one
            Client.write call per batch).
        flush_interval: send when the oldest buffered point has waited
            this many seconds.
        max_buffered_points: the buffer bound; write() blocks beyond it.
        block_timeout: how long write() may block on a full buffer before
            raising BufferFull; None waits as long as it takes.
    """

    def __init__(
        self,
        client: "Client",
        batch_size: int = 5000,
        flush_interval: float = 1.0,
        max_buffered_points: int = 100_000,
        block_timeout: Optional[float] = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgument("batch_size must be an int >= 1, got %r" % (batch_size,))
        if isinstance(max_buffered_points, bool) or not isinstance(max_buffered_points, int) or max_buffered_points < batch_size:
            raise InvalidArgument(
                "max_buffered_points must be an int >= batch_size (%d), got %r" % (batch_size, max_buffered_points)
            )
        if isinstance(flush_interval, bool) or not isinstance(flush_interval, (int, float)) or not flush_interval > 0:
            raise InvalidArgument("flush_interval must be a positive number of seconds, got %r" % (flush_interval,))
        if block_timeout is not None and (not isinstance(block_timeout, (int, float)) or block_timeout < 0):
            raise InvalidArgument("block_timeout must be None or a number of seconds >= 0, got %r" % (block_timeout,))
        self._client = client
        self.batch_size = batch_size
        self.flush_interval = float(flush_interval)
        self.max_buffered_points = max_buffered_points
        self.block_timeout = block_timeout

        self._cond = threading.Condition()
        # REQUIRES: _cond held for every field below.
        # Entries are (monotonic time buffered, sequence number, point).
        self._buf: Deque[Tuple[float, int, Point]] = collections.deque()
        self._inflight = 0  # points taken by the sender, not yet finished
        self._appended = 0  # points ever buffered; the next sequence number
        self._finished = 0  # points acknowledged (accepted or rejected)
        self._flush_target = 0  # flush() wants _finished to reach this
        self._closing = False
        self._error: Optional[BatchWriterError] = None
        self._result = WriteResult()

        self._thread = threading.Thread(target=self._run, name="tributary-batch-writer", daemon=True)
        self._thread.start()
        _open_writers.add(self)

    # -- producer side -----------------------------------------------------

    def add(self, metric: str, labels: Optional[Mapping[str, str]], timestamp: Timestamp, value: float) -> None:
        """Buffer one point; same as write(Point(...))."""
        self.write(Point(metric, labels or {}, timestamp, value))

    def write(self, points: Union[Point, SeriesBatch, Iterable[Union[Point, SeriesBatch]]]) -> None:
        """Buffer points: a Point, a SeriesBatch, or an iterable of them.

        Each point is checked here (types, timestamp, value), so bad input
        raises InvalidArgument at once; points of the same call before the
        bad one stay buffered.

        Raises:
            InvalidArgument: bad input.
            BufferFull: the buffer stayed full for block_timeout seconds.
            BatchWriterError: an earlier send failed; the writer is stopped.
            ClientClosed: the writer was closed.
        """
        if isinstance(points, (Point, SeriesBatch)):
            points = (points,)
        elif isinstance(points, (str, bytes, abc.Mapping)) or not isinstance(points, abc.Iterable):
            raise InvalidArgument("BatchWriter.write: want Points or SeriesBatches, got %s" % type(points).__name__)
        pending: List[Point] = []
        for i, item in enumerate(points):
            if isinstance(item, Point):
                pending.append(_normalize(item, "point %d" % i))
            elif isinstance(item, SeriesBatch):
                pending.extend(_expand(item, "item %d (SeriesBatch)" % i))
            else:
                raise InvalidArgument(
                    "BatchWriter.write: item %d: want a Point or a SeriesBatch, got %s" % (i, type(item).__name__)
                )
            if len(pending) >= self.batch_size:
                self._buffer(pending)
                pending = []
        if pending:
            self._buffer(pending)

    def _buffer(self, points: List[Point]) -> None:
        deadline = None if self.block_timeout is None else time.monotonic() + self.block_timeout
        i = 0
        with self._cond:
            while i < len(points):
                self._check_usable()
                room = self.max_buffered_points - len(self._buf) - self._inflight
                if room <= 0:
                    wait = None if deadline is None else deadline - time.monotonic()
                    if wait is not None and wait <= 0:
                        raise BufferFull(
                            "buffer of %d points stayed full for %.3gs; %d of this write's points were not buffered"
                            % (self.max_buffered_points, self.block_timeout, len(points) - i)
                        )
                    self._cond.wait(wait)
                    continue
                was_empty = not self._buf
                now = time.monotonic()
                for p in points[i:i + room]:
                    self._buf.append((now, self._appended, p))
                    self._appended += 1
                i += room
                # Wake the sender when a batch is due, or when the buffer was
                # empty: it then sleeps without a deadline and must learn the
                # new oldest point's.
                if was_empty or len(self._buf) >= self.batch_size:
                    self._cond.notify_all()

    def _check_usable(self) -> None:
        # REQUIRES: _cond held.
        if self._error is not None:
            raise self._error
        if self._closing:
            raise ClientClosed("batch writer is closed")

    # -- control -------------------------------------------------------------

    def flush(self, timeout: Optional[float] = None) -> WriteResult:
        """Send everything buffered so far and wait for it.

        Returns the running total (as ``result``). Raises BatchWriterError if
        a send failed, DeadlineExceeded when ``timeout`` seconds pass first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            target = self._appended
            self._flush_target = max(self._flush_target, target)
            self._cond.notify_all()
            while self._finished < target and self._error is None:
                if not self._thread.is_alive():
                    break
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    raise DeadlineExceeded("flush: %d points still unsent after %.3gs" % (target - self._finished, timeout))
                self._cond.wait(wait)
            if self._error is not None:
                raise self._error
            return self._result._copy()

    def close(self) -> WriteResult:
        """Send what is buffered, stop the sender, and return the total.
        Idempotent. Raises BatchWriterError if a send failed."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        _open_writers.discard(self)
        with self._cond:
            if self._error is not None:
                raise self._error
            return self._result._copy()

    def __enter__(self) -> "BatchWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        # An exception is already on its way out: do not mask it, but still
        # send what can be sent. A send error stays readable as .error.
        try:
            self.close()
        except TributaryError:
            pass

    @property
    def result(self) -> WriteResult:
        """The running total of what the server acknowledged."""
        with self._cond:
            return self._result._copy()

    @property
    def error(self) -> Optional[BatchWriterError]:
        """The failure that stopped the writer, if any."""
        with self._cond:
            return self._error

    @property
    def pending(self) -> int:
        """Points buffered or being sent, not yet acknowledged."""
        with self._cond:
            return len(self._buf) + self._inflight

    # -- sender side ---------------------------------------------------------

    def _take(self) -> Optional[List[Tuple[float, int, Point]]]:
        """Wait until a batch is due and take it; None when the writer is done."""
        with self._cond:
            while True:
                if self._error is not None:
                    return None
                n = len(self._buf)
                if n == 0 and self._closing:
                    return None
                wait: Optional[float] = None
                if n:
                    flushing = self._closing or self._buf[0][1] < self._flush_target
                    age = time.monotonic() - self._buf[0][0]
                    if n >= self.batch_size or flushing or age >= self.flush_interval:
                        chunk = [self._buf.popleft() for _ in range(min(n, self.batch_size))]
                        self._inflight = len(chunk)
                        return chunk
                    wait = self.flush_interval - age
                self._cond.wait(wait)

    def _run(self) -> None:
        while True:
            chunk = self._take()
            if chunk is None:
                return
            points = [p for _, _, p in chunk]
            try:
                res = self._client.write(points)
            except TributaryError as e:
                with self._cond:
                    if e.result is not None:
                        self._result._merge(e.result, self._client.max_rejection_details)
                    unsent = points + [p for _, _, p in self._buf]
                    self._buf.clear()
                    self._inflight = 0
                    self._error = BatchWriterError(e, unsent)
                    self._error.result = self._result._copy()
                    self._cond.notify_all()
                return
            except BaseException as e:  # pragma: no cover - a bug, not a server answer
                with self._cond:
                    cause = TributaryError("BUG: batch writer send failed: %r" % (e,))
                    self._error = BatchWriterError(cause, points + [p for _, _, p in self._buf])
                    self._buf.clear()
                    self._inflight = 0
                    self._cond.notify_all()
                raise
            seqs = [seq for _, seq, _ in chunk]
            # Report rejections by the point's sequence number in this writer.
            res.rejections = [
                dataclasses.replace(r, index=seqs[r.index]) if r.index is not None and 0 <= r.index < len(seqs) else r
                for r in res.rejections
            ]
            with self._cond:
                self._result._merge(res, self._client.max_rejection_details)
                self._finished += len(chunk)
                self._inflight = 0
                self._cond.notify_all()


def _normalize(p: Point, what: str) -> Point:
    """Check a point and return a copy in canonical form (int ms, float,
    own label dict), so later changes by the caller cannot alter it."""
    full = series_labels(p.metric, p.labels, what)
    labels: Dict[str, str] = {k: v for k, v in full.items() if k != METRIC_NAME}
    ts, v = p.timestamp, p.value
    if type(ts) is not int or not -(1 << 63) <= ts < 1 << 63:  # fast paths; the converters check the rest
        ts = to_ms(ts, what + ": timestamp")
    if type(v) is not float:
        v = to_value(v, what + ": value")
    return Point(p.metric, labels, ts, v)


def _expand(b: SeriesBatch, what: str) -> List[Point]:
    full = series_labels(b.metric, b.labels, what)
    labels = {k: v for k, v in full.items() if k != METRIC_NAME}
    if len(b.timestamps) != len(b.values):
        raise InvalidArgument("%s: %d timestamps but %d values" % (what, len(b.timestamps), len(b.values)))
    return [
        Point(b.metric, labels, to_ms(t, "%s: timestamps[%d]" % (what, j)), to_value(v, "%s: values[%d]" % (what, j)))
        for j, (t, v) in enumerate(zip(b.timestamps, b.values))
    ]
