"""A circuit breaker per endpoint: a dead endpoint is known in seconds, not after each
episode has spent its own minutes of backoff on it.

Only failures that say nobody is there count: a connection refused, a host that does not
resolve, a connect timeout, an answer that is not the wire format at all. A 5xx, a 429 or a
stream cut mid-answer come from a server that is up, and are the client's retries' business.
After ``threshold`` such failures in a row (across every episode sharing the endpoint),
spread over at least ``min_span_s`` (a burst of refused connections from a server whose
listen queue overflowed is not a dead server), the breaker opens: requests fail at once
with :class:`EndpointDown` for ``cooldown_s``; then trial requests may go through, and an
answer closes the breaker again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from agentenv.errors import EndpointDown
from agentenv.log import get_logger

log = get_logger(__name__)


class Breaker:
    """The health of one endpoint, shared by every request to it."""

    def __init__(
        self,
        name: str,
        *,
        threshold: int = 5,
        min_span_s: float = 5.0,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        if threshold < 1:
            raise ValueError("a breaker's threshold must be at least 1")
        self.name = name
        self.threshold = threshold
        self.min_span_s = min_span_s
        self._clock = clock
        self.cooldown_s = cooldown_s
        self.failures = 0  # connection failures in a row
        self._first_at = 0.0  # when the first of them came
        self.reason = ""  # the last of them, for a person
        self._opened_at: float | None = None

    @property
    def open(self) -> bool:
        """Whether requests should fail at once (open, and not yet cooled down)."""
        return self._opened_at is not None and self._clock() - self._opened_at < self.cooldown_s

    @property
    def tripped(self) -> bool:
        """Whether the endpoint was last seen dead (open, or cooled down and untried since)."""
        return self._opened_at is not None

    def check(self) -> None:
        """Raise :class:`EndpointDown` while the breaker is open."""
        if self.open:
            raise EndpointDown(self.describe(), reason=self.reason)

    def describe(self) -> str:
        """Why the endpoint is taken for down, for a person."""
        return f"{self.name} does not answer ({self.reason})"

    def failed(self, reason: str) -> None:
        """A request found nobody there; opens the breaker at the threshold (a failed
        trial request after the cool-down opens it again at once)."""
        now = self._clock()
        if self.failures == 0:
            self._first_at = now
        self.failures += 1
        self.reason = reason
        spread = now - self._first_at >= self.min_span_s or self._opened_at is not None
        if self.failures >= self.threshold and spread:
            if not self.open:
                log.warning("model.breaker_open", endpoint=self.name, reason=reason)
            self._opened_at = now

    def trip(self, reason: str) -> None:
        """Open at once (a probe found the endpoint dead)."""
        if not self.open:
            log.warning("model.breaker_open", endpoint=self.name, reason=reason)
        self.failures = max(self.failures + 1, self.threshold)
        self.reason = reason
        self._opened_at = self._clock()

    def succeeded(self) -> None:
        """A request got an answer: closed again."""
        if self._opened_at is not None:
            log.info("model.breaker_closed", endpoint=self.name)
        self.failures = 0
        self._opened_at = None


def breaker_of(model: object) -> Breaker | None:
    """The breaker a chat model keeps (an :class:`~agentenv.model.OpenAIChatModel` does;
    a model of the caller's own may not)."""
    breaker = getattr(model, "breaker", None)
    return breaker if isinstance(breaker, Breaker) else None


__all__ = ["Breaker", "breaker_of"]
