"""Turning what the caller writes into bounded WriteRequests.

The input is consumed lazily and cut into requests of at most
``max_points`` points and about ``max_bytes`` encoded bytes, so writing a
generator of a billion points holds one request in memory at a time. Inside
a request, points are grouped by series (one columnar SeriesBatch per
series, in order of first appearance), and each point remembers where it
came from so that the server's rejections (batch index, point index) can be
reported against the caller's own input.

Not safe for concurrent use; every write builds its own requests.
"""

from __future__ import annotations

import re
from collections import abc
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Mapping, Sequence, Tuple, Union

from ._gen import tributary_pb2 as pb
from .errors import InvalidArgument, SelectorError, brief
from .model import Point, Rejection, SeriesBatch, WriteResult, series_labels, to_ms, to_value
from .selector import METRIC_NAME, parse_selector

__all__ = ["WriteInput", "Request", "requests_from", "result_from"]

#: What Client.write accepts: an iterable of Point and SeriesBatch items (or
#: a single one), or a dict of series to (timestamps, values) columns,
#: keyed by series notation such as 'cpu{host="a"}'.
WriteInput = Union[
    Point,
    SeriesBatch,
    Iterable[Union[Point, SeriesBatch]],
    Mapping[str, Tuple[Sequence[object], Sequence[object]]],
]

# Bytes a point may take on the wire: a varint timestamp (up to 10) and a
# double (8), packed.
_POINT_BYTES = 18
# Framing of one SeriesBatch, and of one label, beyond the strings.
_BATCH_OVERHEAD = 32
_LABEL_OVERHEAD = 8

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# The node prefixes messages with its own position ("batch 3 point 7: "),
# which indexes the regrouped request, not the caller's input; Rejection
# carries the caller's position instead.
_POSITION_PREFIX = re.compile(r"^batch \d+(?: point \d+)?: ")

_REASONS = {v: k[len("REJECT_REASON_"):] for k, v in pb.RejectReason.items()}


@dataclass
class _Series:
    labels: Dict[str, str]
    size: int  # estimated bytes of the labels
    ts: List[int] = field(default_factory=list)
    vs: List[float] = field(default_factory=list)
    idx: List[int] = field(default_factory=list)  # input index of each point


@dataclass
class Request:
    """One WriteRequest under construction, with the provenance of its points."""

    series: List[_Series] = field(default_factory=list)
    by_key: Dict[Tuple[Tuple[str, str], ...], _Series] = field(default_factory=dict)
    points: int = 0
    size: int = 0

    def to_proto(self) -> pb.WriteRequest:
        req = pb.WriteRequest()
        for s in self.series:
            b = req.batches.add()
            for k, v in s.labels.items():
                b.series.labels.add(name=k, value=v)
            b.timestamps_ms.extend(s.ts)
            b.values.extend(s.vs)
        return req


def _series_size(key: Tuple[Tuple[str, str], ...]) -> int:
    return _BATCH_OVERHEAD + sum(_utf8_len(k) + _utf8_len(v) + _LABEL_OVERHEAD for k, v in key)


def _utf8_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))


class _Builder:
    def __init__(self, max_points: int, max_bytes: int) -> None:
        self.max_points = max_points
        self.max_bytes = max_bytes
        self.req = Request()

    def full(self, extra_bytes: int) -> bool:
        r = self.req
        return r.points > 0 and (r.points >= self.max_points or r.size + extra_bytes > self.max_bytes)

    def extra(self, key: Tuple[Tuple[str, str], ...]) -> int:
        """Bytes one more point of series key adds to the request."""
        return _POINT_BYTES + (0 if key in self.req.by_key else _series_size(key))

    def take(self) -> Request:
        r, self.req = self.req, Request()
        return r

    def series_for(self, key: Tuple[Tuple[str, str], ...], labels: Dict[str, str], what: str) -> _Series:
        s = self.req.by_key.get(key)
        if s is None:
            size = _series_size(key)
            if size + _POINT_BYTES > self.max_bytes:
                raise InvalidArgument(
                    "%s: the labels of the series take about %d bytes, more than max_request_bytes=%d"
                    % (what, size, self.max_bytes)
                )
            s = _Series(labels=labels, size=size)
            self.req.by_key[key] = s
            self.req.series.append(s)
            self.req.size += size
        return s

    def add_point(self, p: Point, index: int) -> Iterator[Request]:
        what = "point %d" % index
        full = series_labels(p.metric, p.labels, what)
        key = tuple(sorted(full.items()))
        # Fast paths for plain ints and floats; the converters check the rest.
        ts = p.timestamp
        if type(ts) is not int or not _INT64_MIN <= ts <= _INT64_MAX:
            ts = to_ms(ts, what + ": timestamp")
        v = p.value
        if type(v) is not float:
            v = to_value(v, what + ": value")
        if self.full(self.extra(key)):
            yield self.take()
        s = self.series_for(key, full, what)
        s.ts.append(ts)
        s.vs.append(v)
        s.idx.append(index)
        self.req.points += 1
        self.req.size += _POINT_BYTES

    def add_columns(self, full: Dict[str, str], ts: Sequence[object], vs: Sequence[object], what: str) -> Iterator[Request]:
        try:
            nts, nvs = len(ts), len(vs)
        except TypeError:
            raise InvalidArgument("%s: timestamps and values must be sequences (lists, tuples, arrays)" % what) from None
        if isinstance(ts, (str, bytes)) or isinstance(vs, (str, bytes)):
            raise InvalidArgument("%s: timestamps and values must be sequences of numbers, not strings" % what)
        if nts != nvs:
            raise InvalidArgument("%s: %d timestamps but %d values" % (what, nts, nvs))
        key = tuple(sorted(full.items()))
        i = 0
        while i < nts:
            if self.full(self.extra(key)):
                yield self.take()
            s = self.series_for(key, full, what)
            # Room left in this request, in points.
            room = min(
                self.max_points - self.req.points,
                max(1, (self.max_bytes - self.req.size) // _POINT_BYTES),
            )
            end = min(nts, i + room)
            cts, cvs = ts[i:end], vs[i:end]
            if _plain_ints(cts) and _plain_floats(cvs):
                # Fast path for the common case: lists of int ms and floats.
                s.ts.extend(cts)
                s.vs.extend(cvs)
            else:
                for j in range(i, end):
                    s.ts.append(to_ms(ts[j], "%s: timestamps[%d]" % (what, j)))
                    s.vs.append(to_value(vs[j], "%s: values[%d]" % (what, j)))
            s.idx.extend(range(i, end))
            n = end - i
            self.req.points += n
            self.req.size += n * _POINT_BYTES
            i = end


def _plain_ints(xs: Sequence[object]) -> bool:
    """True when every element is an int (not a bool) inside int64."""
    try:
        if not all(type(x) is int for x in xs):
            return False
        return len(xs) == 0 or (_INT64_MIN <= min(xs) and max(xs) <= _INT64_MAX)  # type: ignore[type-var]
    except TypeError:
        return False


def _plain_floats(xs: Sequence[object]) -> bool:
    """True when every element is a float."""
    return all(type(x) is float for x in xs)


def _columnar_key(key: object, i: int) -> Dict[str, str]:
    what = "series %d (%s)" % (i, brief(key))
    if not isinstance(key, str):
        raise InvalidArgument("%s: keys of a columnar write must be series strings such as 'cpu{host=\"a\"}'" % what)
    try:
        ms = parse_selector(key)
    except SelectorError as e:
        raise InvalidArgument("%s: %s" % (what, e.details)) from None
    labels: Dict[str, str] = {}
    for m in ms:
        if m.op != "=":
            raise InvalidArgument("%s: a series takes only = labels, not %s" % (what, m))
        if m.name in labels:
            raise InvalidArgument("%s: label %s given twice" % (what, brief(m.name)))
        labels[m.name] = m.value
    if METRIC_NAME not in labels:
        raise InvalidArgument("%s: no metric name" % what)
    return labels


def requests_from(data: WriteInput, max_points: int, max_bytes: int) -> Iterator[Request]:
    """Yield the requests that carry data, each within the bounds.

    Bad input raises InvalidArgument when it is reached; requests yielded
    before that are complete and may already have been sent by the caller.
    """
    b = _Builder(max_points, max_bytes)
    if isinstance(data, abc.Mapping):
        for i, (key, cols) in enumerate(data.items()):
            labels = _columnar_key(key, i)
            what = "series %d (%s)" % (i, brief(key))
            if isinstance(cols, (str, bytes)) or not isinstance(cols, (tuple, list)) or len(cols) != 2:
                raise InvalidArgument("%s: want a (timestamps, values) pair, got %s" % (what, type(cols).__name__))
            yield from b.add_columns(labels, cols[0], cols[1], what)
    else:
        items: Iterable[object]
        if isinstance(data, (Point, SeriesBatch)):
            items = (data,)
        elif isinstance(data, (str, bytes)) or not isinstance(data, abc.Iterable):
            raise InvalidArgument(
                "write: want Points, SeriesBatches or a dict of series columns, got %s" % type(data).__name__
            )
        else:
            items = data
        for i, item in enumerate(items):
            if isinstance(item, Point):
                yield from b.add_point(item, i)
            elif isinstance(item, SeriesBatch):
                what = "item %d (SeriesBatch)" % i
                full = series_labels(item.metric, item.labels, what)
                yield from b.add_columns(full, item.timestamps, item.values, what)
            else:
                raise InvalidArgument("item %d: want a Point or a SeriesBatch, got %s" % (i, type(item).__name__))
    if b.req.points:
        yield b.take()


def result_from(req: Request, resp: pb.WriteResponse, max_details: int) -> WriteResult:
    """Map a WriteResponse onto the caller's input."""
    out = WriteResult(accepted=resp.accepted, rejected=resp.rejected, requests=1)
    for r in resp.rejections:
        if len(out.rejections) >= max_details:
            break
        reason = _REASONS.get(r.reason, "UNKNOWN_%d" % r.reason)
        message = _POSITION_PREFIX.sub("", r.message)
        if not 0 <= r.batch_index < len(req.series):
            # The server named a batch we did not send: keep the message.
            out.rejections.append(Rejection(reason, message, {}, points=r.points or 1))
            continue
        s = req.series[r.batch_index]
        if 0 <= r.point_index < len(s.ts):
            out.rejections.append(
                Rejection(
                    reason,
                    message,
                    dict(s.labels),
                    points=r.points or 1,
                    index=s.idx[r.point_index],
                    timestamp_ms=s.ts[r.point_index],
                    value=s.vs[r.point_index],
                )
            )
        else:
            out.rejections.append(Rejection(reason, message, dict(s.labels), points=r.points or len(s.ts)))
    return out
