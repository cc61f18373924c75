"""Retry policy: exponential backoff with jitter, for UNAVAILABLE and
RESOURCE_EXHAUSTED only.

Those two codes mean the node did nothing (it is shutting down, could not
make a write durable, or is overloaded) and asks to be tried again later.
Every other code is final: retrying a bad request or a missing token only
repeats the failure. Resending a write is safe because writes are
idempotent: a duplicate timestamp is last-write-wins with the same value.

The wait before retry n (n = 1, 2, ...) is drawn uniformly from
``[b * (1 - jitter), b]`` where ``b = min(max_backoff, initial_backoff *
multiplier ** (n - 1))``. The jitter spreads out clients that failed
together so they do not all come back at the same instant.

RetryPolicy is immutable and safe to share between threads.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Union

from .errors import InvalidArgument

__all__ = ["RetryPolicy", "NO_RETRY"]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry.

    Attributes:
        max_retries: retries after the first attempt (0: never retry).
        initial_backoff: seconds before the first retry, at most.
        max_backoff: cap on one wait, seconds.
        multiplier: growth of the wait per retry.
        jitter: fraction of each wait that is random, in [0, 1].
    """

    max_retries: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        def bad(msg: str) -> None:
            raise InvalidArgument("RetryPolicy: " + msg)

        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            bad("max_retries must be an int >= 0, got %r" % (self.max_retries,))
        if not (0 <= self.initial_backoff <= self.max_backoff):
            bad("need 0 <= initial_backoff <= max_backoff, got %r and %r" % (self.initial_backoff, self.max_backoff))
        if not self.multiplier >= 1:
            bad("multiplier must be >= 1, got %r" % (self.multiplier,))
        if not 0 <= self.jitter <= 1:
            bad("jitter must be in [0, 1], got %r" % (self.jitter,))

    def backoff(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number ``retry`` (1-based).

        ``rand`` returns a float in [0, 1); tests pass a fixed one.
        """
        if retry < 1:
            raise InvalidArgument("RetryPolicy.backoff: retry numbers start at 1, got %d" % retry)
        try:
            b = min(self.max_backoff, self.initial_backoff * self.multiplier ** (retry - 1))
        except OverflowError:
            b = self.max_backoff
        return b * (1 - self.jitter * rand())

    @staticmethod
    def of(retries: Union[int, "RetryPolicy", None]) -> "RetryPolicy":
        """Build a policy from the Client's ``retries`` argument: an int
        (number of retries, default timing), a RetryPolicy, or None (off)."""
        if retries is None:
            return NO_RETRY
        if isinstance(retries, RetryPolicy):
            return retries
        if isinstance(retries, bool) or not isinstance(retries, int):
            raise InvalidArgument("retries must be an int, a RetryPolicy or None, got %s" % type(retries).__name__)
        return RetryPolicy(max_retries=retries)


#: Never retry.
NO_RETRY = RetryPolicy(max_retries=0)
