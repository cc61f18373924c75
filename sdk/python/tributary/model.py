"""The SDK's data types: what goes in (Point, SeriesBatch), what comes back
(Series, WriteResult, Rejection, Status), and time conversion.

Timestamps are int milliseconds since the Unix epoch (UTC), as on the wire.
Wherever the SDK takes a time it also accepts a timezone-aware
``datetime.datetime``; naive datetimes and floats are refused, because
guessing their meaning (local time? seconds?) silently stores data at the
wrong time.

Instances are immutable (frozen dataclasses) except the lists inside
Series, SeriesBatch and WriteResult, which belong to the caller once
returned. They are safe to share between threads as long as nobody mutates
those lists.
"""

from __future__ import annotations

import datetime as _dt
import numbers
from collections import abc
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import InvalidArgument, RejectedPoints, brief
from .selector import METRIC_NAME, check_utf8, format_series

__all__ = [
    "Point",
    "SeriesBatch",
    "Series",
    "Rejection",
    "WriteResult",
    "Status",
    "Timestamp",
    "to_ms",
    "from_ms",
]

#: A point in time: int milliseconds since the epoch, or an aware datetime.
Timestamp = Union[int, _dt.datetime]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MS = _dt.timedelta(milliseconds=1)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def to_ms(t: object, what: str = "timestamp") -> int:
    """Convert an int (milliseconds) or an aware datetime to int milliseconds.

    Raises InvalidArgument naming ``what`` for anything else: floats (often
    seconds from time.time() by mistake), naive datetimes, bools, values
    outside int64.
    """
    if isinstance(t, bool):
        raise InvalidArgument("%s: bool %s is not a time" % (what, t))
    if isinstance(t, numbers.Integral):
        ms = int(t)
        if not _INT64_MIN <= ms <= _INT64_MAX:
            raise InvalidArgument("%s: %d ms is outside the int64 range" % (what, ms))
        return ms
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None or t.tzinfo.utcoffset(t) is None:
            raise InvalidArgument(
                "%s: naive datetime %s has no time zone; use an aware one, "
                "e.g. datetime.now(timezone.utc)" % (what, t.isoformat())
            )
        return (t - _EPOCH) // _MS
    if isinstance(t, numbers.Real):
        raise InvalidArgument(
            "%s: %s is a %s; give int milliseconds since the epoch (for seconds "
            "from time.time() use int(t * 1000)) or an aware datetime" % (what, brief(t), type(t).__name__)
        )
    raise InvalidArgument(
        "%s: want int milliseconds since the epoch or an aware datetime, got %s" % (what, type(t).__name__)
    )


def from_ms(ms: int) -> _dt.datetime:
    """Convert int milliseconds since the epoch to an aware UTC datetime."""
    return _EPOCH + ms * _MS


def to_value(v: object, what: str = "value") -> float:
    """Convert a real number to float; refuse bools, strings and the like."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise InvalidArgument("%s: want a real number, got %s %s" % (what, type(v).__name__, brief(v)))
    try:
        return float(v)
    except OverflowError:
        raise InvalidArgument("%s: %s is too large for a float64" % (what, type(v).__name__)) from None


def series_labels(metric: object, labels: object, what: str) -> Dict[str, str]:
    """Build the full label dict (with __name__) of a series, checking types.

    Names and values are otherwise validated by the server, which reports
    bad ones as INVALID_SERIES rejections.
    """
    if not isinstance(metric, str) or not metric:
        raise InvalidArgument("%s: metric must be a non-empty str, got %s" % (what, brief(metric)))
    if not metric.isascii():
        check_utf8(metric, "%s: metric" % what)
    out = {METRIC_NAME: metric}
    if labels is None:
        return out
    if not isinstance(labels, abc.Mapping):
        raise InvalidArgument("%s: labels must be a dict of str to str, got %s" % (what, type(labels).__name__))
    for k, v in labels.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidArgument("%s: label %s=%s: names and values must be str" % (what, brief(k), brief(v)))
        if not (k.isascii() and v.isascii()):  # the messages cost more than the check
            check_utf8(k, "%s: label name" % what)
            check_utf8(v, "%s: label %s" % (what, brief(k)))
        if k == METRIC_NAME:
            if v != metric:
                raise InvalidArgument("%s: labels give %s=%s but metric is %s" % (what, METRIC_NAME, brief(v), brief(metric)))
            continue
        out[k] = v
    return out


@dataclass(frozen=True)
class Point:
    """One sample of one series.

    Attributes:
        metric: the metric name (stored as label ``__name__``).
        labels: the other labels, name to value. A label with an empty value
            is the same as no label.
        timestamp: int milliseconds since the epoch, or an aware datetime.
        value: the sample, any real number (NaN and infinities included).
    """

    metric: str
    labels: Mapping[str, str]
    timestamp: Timestamp
    value: float


@dataclass(frozen=True)
class SeriesBatch:
    """Many samples of one series in columnar form:
    ``timestamps[i]`` goes with ``values[i]``.

    Samples need not be sorted; a duplicate timestamp is last-write-wins.
    """

    metric: str
    labels: Mapping[str, str]
    timestamps: Sequence[Timestamp]
    values: Sequence[float]


@dataclass(frozen=True)
class Series:
    """One series (or group) of a query answer.

    Attributes:
        labels: the labels of the series, including ``__name__``; for a
            grouped aggregation only the group_by labels.
        timestamps: int milliseconds, ascending.
        values: the values, ``values[i]`` at ``timestamps[i]``.
    """

    labels: Dict[str, str]
    timestamps: List[int] = field(default_factory=list)
    values: List[float] = field(default_factory=list)

    @property
    def metric(self) -> str:
        """The metric name, or "" for a group."""
        return self.labels.get(METRIC_NAME, "")

    def __len__(self) -> int:
        return len(self.timestamps)

    def __iter__(self) -> Iterator[Tuple[int, float]]:
        """Iterate over (timestamp_ms, value) pairs."""
        return zip(self.timestamps, self.values)

    def datetimes(self) -> List[_dt.datetime]:
        """The timestamps as aware UTC datetimes."""
        return [from_ms(t) for t in self.timestamps]

    def __str__(self) -> str:
        return "%s (%d points)" % (format_series(self.labels), len(self.timestamps))


@dataclass(frozen=True)
class Rejection:
    """Points the server did not store, and why.

    Attributes:
        reason: ``"INVALID_SERIES"``, ``"LENGTH_MISMATCH"``, ``"TOO_OLD"``,
            ``"TOO_FAR_IN_FUTURE"``, ``"INVALID_VALUE"``, ``"LIMIT_EXCEEDED"``
            (or ``"UNSPECIFIED"``).
        message: the server's explanation, naming the field and value.
        labels: the series, including ``__name__``.
        points: how many points this rejection covers (more than one when the
            whole series was rejected, e.g. for an invalid label name).
        index: where the rejected point was in the input: its position in
            the iterable of Points given to write(), or within the series'
            timestamps for columnar input; None when the whole series (in
            one request) was rejected.
        timestamp_ms: the rejected point's timestamp, None for a whole series.
        value: the rejected point's value, None for a whole series.
    """

    reason: str
    message: str
    labels: Dict[str, str]
    points: int = 1
    index: Optional[int] = None
    timestamp_ms: Optional[int] = None
    value: Optional[float] = None

    def __str__(self) -> str:
        where = format_series(self.labels)
        if self.index is not None:
            where += " point %d" % self.index
        return "%s: %s: %s" % (where, self.reason, self.message)


@dataclass
class WriteResult:
    """What a write did.

    Attributes:
        accepted: points stored (durable when the call returned).
        rejected: points refused, in total.
        rejections: details of the first rejections (bounded, see
            ``Client(max_rejection_details=...)``); ``rejected`` is exact.
        requests: how many Write calls were made.
    """

    accepted: int = 0
    rejected: int = 0
    rejections: List[Rejection] = field(default_factory=list)
    requests: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing was rejected."""
        return self.rejected == 0

    def check(self) -> "WriteResult":
        """Raise RejectedPoints if any point was rejected; return self."""
        if self.rejected:
            raise RejectedPoints(self)
        return self

    def _merge(self, other: "WriteResult", max_details: int) -> None:
        self.accepted += other.accepted
        self.rejected += other.rejected
        self.requests += other.requests
        room = max_details - len(self.rejections)
        if room > 0:
            self.rejections.extend(other.rejections[:room])

    def _copy(self) -> "WriteResult":
        return WriteResult(self.accepted, self.rejected, list(self.rejections), self.requests)


@dataclass(frozen=True)
class Status:
    """A node's identity and counters, as returned by Client.status()."""

    node_id: str
    role: str
    version: str
    series: int
    head_series: int
    head_samples: int
    wal_segment_seq: int
    wal_bytes: int
    points_accepted_total: int
    points_rejected_total: int
    uptime_ms: int
    corrupt_segments_quarantined: int

