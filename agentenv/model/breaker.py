"""A circuit breaker per endpoint: a dead endpoint is known in seconds, not after each
episode has spent its own minutes of backoff on it.

Only failures that say nobody is there count: a connection refused, a host that does not
resolve, a connect timeout, an answer that is not the wire format at all. A 5xx, a 429 or a
stream cut mid-answer come from a server that is up, and are the client's retries' business.
After ``threshold`` such failures in a row (across every episode sharing the endpoint) the
breaker opens: requests fail at once with :class:`EndpointDown` for ``cooldown_s``; then one
trial request may go through, and its success closes the breaker again.
"""

from __future__ import annotations

import time

from agentenv.errors import EndpointDown
from agentenv.log import get_logger

log = get_logger(__name__)


class Breaker:
    """The health of one endpoint, shared by every request to it."""

    def __init__(self, name: str, *, threshold: int = 5, cooldown_s: float = 30.0):
        if threshold < 1:
            raise ValueError("a breaker's threshold must be at least 1")
        self.name = name
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.failures = 0  # connection failures in a row
        self.reason = ""  # the last of them, for a person
        self._opened_at: float | None = None

    @property
    def open(self) -> bool:
        """Whether requests should fail at once (open, and not yet cooled down)."""
        return self._opened_at is not None and time.monotonic() - self._opened_at < self.cooldown_s

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
        self.failures += 1
        self.reason = reason
        if self.failures >= self.threshold:
            if not self.open:
                log.warning("model.breaker_open", endpoint=self.name, reason=reason)
            self._opened_at = time.monotonic()

    def trip(self, reason: str) -> None:
        """Open at once (a probe found the endpoint dead)."""
        self.failures = max(self.failures, self.threshold - 1)
        self.failed(reason)

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
