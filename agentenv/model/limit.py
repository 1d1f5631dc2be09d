"""An adaptive bound on concurrent requests to one endpoint, shared by every episode of a job.

Like TCP congestion control: start small and grow by one per success (slow start, doubling
per round) up to a threshold, then by ``1/limit`` per success; on a 429 the threshold and
the limit are halved. A burst of 429s from requests that were all in flight at once halves
the limit once, not once per request: only a request started after the last cut can cut
again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class AdaptiveLimit:
    """How many requests may be in flight to one endpoint; see the module docstring."""

    def __init__(self, initial: int = 4, *, minimum: int = 1, maximum: int = 256):
        if not 1 <= minimum <= initial <= maximum:
            raise ValueError(
                f"need 1 <= minimum <= initial <= maximum, got {minimum}, {initial}, {maximum}"
            )
        self.minimum = minimum
        self.maximum = maximum
        self.limit = float(initial)
        self.threshold = float(maximum)
        self.in_flight = 0
        self.generation = 0  # bumped by each cut; a 429 from an older generation is ignored
        self._waiters: deque[anyio.Event] = deque()

    @property
    def capacity(self) -> int:
        """Requests allowed in flight now."""
        return max(self.minimum, int(self.limit))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        """Hold one request slot; yields the generation to pass to :meth:`rate_limited`."""
        while self.in_flight >= self.capacity:
            event = anyio.Event()
            self._waiters.append(event)
            try:
                await event.wait()
            finally:
                if event in self._waiters:
                    self._waiters.remove(event)
        self.in_flight += 1
        try:
            yield self.generation
        finally:
            self.in_flight -= 1
            self._wake()

    def succeeded(self) -> None:
        """A request went through: grow (fast below the threshold, slowly above it)."""
        step = 1.0 if self.limit < self.threshold else 1.0 / self.limit
        self.limit = min(float(self.maximum), self.limit + step)
        self._wake()

    def rate_limited(self, generation: int) -> None:
        """A request started in ``generation`` got a 429: halve, once per generation."""
        if generation != self.generation:
            return
        self.generation += 1
        self.threshold = max(float(self.minimum), self.limit / 2)
        self.limit = self.threshold

    def _wake(self) -> None:
        free = self.capacity - self.in_flight
        while free > 0 and self._waiters:
            self._waiters.popleft().set()
            free -= 1
