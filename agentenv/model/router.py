"""Choosing an endpoint per episode by rule, and falling back when one is down.

Rules restrict which endpoints a task may use, by tag: by default a task tagged
``sensitive`` may only go to self-hosted endpoints, never to a hosted API. Among the allowed
endpoints, in the router's order, an episode uses the first one that is up and stays on it
(its prefix cache is there); when it is down (connection refused, 5xx or timeouts after the
client's own retries) the episode falls back to the next *allowed* one. A fallback never
crosses a rule. Every decision is logged and recorded in the turn's :class:`Route`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from pydantic import BaseModel

from agentenv.errors import AllEndpointsDown, EndpointUnavailable, NoRoute
from agentenv.log import get_logger
from agentenv.model.breaker import breaker_of
from agentenv.model.client import EventCallback, OpenAIChatModel
from agentenv.model.endpoints import Endpoint
from agentenv.model.probe import Health
from agentenv.model.types import ChatModel, Completion, Route

log = get_logger(__name__)


class Rule(BaseModel):
    """Tasks carrying ``tag`` may only use endpoints that are self-hosted (with
    ``self_hosted_only``) and, if ``endpoints`` is given, named there."""

    tag: str
    self_hosted_only: bool = False
    endpoints: list[str] | None = None

    def allows(self, endpoint: Endpoint) -> bool:
        """Whether this rule lets a tagged task use ``endpoint``."""
        if self.self_hosted_only and endpoint.hosted:
            return False
        return self.endpoints is None or endpoint.name in self.endpoints


DEFAULT_RULES = (Rule(tag="sensitive", self_hosted_only=True),)


class Router:
    """Endpoints in order of preference, the rules, and one client per endpoint, shared by
    every episode (so each endpoint's concurrency limit is shared too)."""

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        *,
        rules: Sequence[Rule] = DEFAULT_RULES,
        make_model: Callable[[Endpoint], ChatModel] = OpenAIChatModel.for_endpoint,
        down_for_s: float = 30.0,
    ):
        if not endpoints:
            raise ValueError("a router needs at least one endpoint")
        names = [e.name for e in endpoints]
        if len(set(names)) != len(names):
            raise ValueError(f"endpoint names must be unique: {names}")
        self.endpoints = list(endpoints)
        self.rules = list(rules)
        self.down_for_s = down_for_s
        self._make_model = make_model
        self._models: dict[str, ChatModel] = {}
        self._down_until: dict[str, float] = {}

    def allowed(self, tags: Sequence[str] = ()) -> list[tuple[Endpoint, str]]:
        """The endpoints a task with ``tags`` may use, in order, each with the reason."""
        rules = [r for r in self.rules if r.tag in tags]
        out = []
        for endpoint in self.endpoints:
            if all(r.allows(endpoint) for r in rules):
                why = ", ".join(f"rule {r.tag!r}" for r in rules) or "no rule applies"
                out.append((endpoint, why))
        return out

    def for_task(self, tags: Sequence[str] = (), *, task_id: str = "") -> RoutedModel:
        """A chat model for one episode of a task with ``tags``; raises :class:`NoRoute` when
        the rules leave no endpoint."""
        allowed = self.allowed(tags)
        if not allowed:
            raise NoRoute(
                f"no endpoint may serve task {task_id!r} (tags {list(tags)}): the rules exclude "
                f"{', '.join(e.name for e in self.endpoints)}; add a self-hosted endpoint"
            )
        return RoutedModel(self, allowed, task_id)

    def models(self) -> list[ChatModel]:
        """The clients made so far, one per endpoint used."""
        return list(self._models.values())

    def model(self, endpoint: Endpoint) -> ChatModel:
        """The shared client for ``endpoint``."""
        if endpoint.name not in self._models:
            self._models[endpoint.name] = self._make_model(endpoint)
        return self._models[endpoint.name]

    def is_down(self, endpoint: Endpoint) -> bool:
        """Whether ``endpoint`` failed recently enough to be skipped (its client gave up on
        it, or its breaker is open)."""
        breaker = breaker_of(self._models.get(endpoint.name))
        if breaker is not None and breaker.open:
            return True
        return self._down_until.get(endpoint.name, 0.0) > time.monotonic()

    def down(self, tags: Sequence[str] = ()) -> str | None:
        """Why no endpoint a task with ``tags`` may use answers, when that is so: each one's
        breaker tripped (nobody there, not merely failing); ``None`` otherwise."""
        reasons = []
        for endpoint, _ in self.allowed(tags):
            breaker = breaker_of(self._models.get(endpoint.name))
            if breaker is None or not breaker.tripped:
                return None
            reasons.append(breaker.describe())
        return "; ".join(reasons) or None

    async def probe(self, *, timeout_s: float = 10.0) -> list[Health]:
        """Probe every endpoint at once (those whose client can be probed): see
        :mod:`agentenv.model.probe`. A dead one is skipped from now on."""
        found: dict[str, Health] = {}

        async def one(endpoint: Endpoint) -> None:
            check = getattr(self.model(endpoint), "probe", None)
            if check is not None:
                found[endpoint.name] = await check(timeout_s=timeout_s)

        async with anyio.create_task_group() as tg:
            for endpoint in self.endpoints:
                tg.start_soon(one, endpoint)
        return [found[e.name] for e in self.endpoints if e.name in found]

    def mark_down(self, endpoint: Endpoint) -> None:
        """Skip ``endpoint`` for ``down_for_s`` (other episodes too)."""
        self._down_until[endpoint.name] = time.monotonic() + self.down_for_s

    async def aclose(self) -> None:
        """Close every client's connections."""
        for model in self._models.values():
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()


class RoutedModel:
    """The chat model of one episode: sticks to one endpoint, falls back within the rules."""

    def __init__(self, router: Router, allowed: list[tuple[Endpoint, str]], task_id: str):
        self.router = router
        self.allowed = allowed
        self.task_id = task_id
        self.current: Endpoint | None = None

    @property
    def model(self) -> str:
        """The model name of the episode's endpoint (the first allowed one until one
        answers): what a harness is told it talks to."""
        return (self.current or self.allowed[0][0]).model

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> Completion:
        """One turn from the episode's endpoint, or the next allowed one if it is down."""
        # the current endpoint first, then the others that are up, then (rather than give
        # up at once) those marked down by other episodes
        order = sorted(
            self.allowed,
            key=lambda pair: (pair[0] is not self.current, self.router.is_down(pair[0])),
        )
        failed: list[str] = []
        last: BaseException | None = None
        for endpoint, why in order:
            try:
                done = await self.router.model(endpoint).complete(
                    messages, tools, on_event=on_event
                )
            except EndpointUnavailable as e:  # the client retried and gave up (429s, cuts too)
                self.router.mark_down(endpoint)
                failed.append(endpoint.name)
                last = e
                log.warning(
                    "model.endpoint_down",
                    task=self.task_id,
                    endpoint=endpoint.name,
                    error=f"{type(e).__name__}: {e}",
                )
                continue
            # endpoints preferred over this one but skipped as down (by the probe, a breaker
            # or another episode) were fallen back from too, though not tried this turn
            for preferred, _ in self.allowed:
                if preferred is endpoint:
                    break
                if preferred.name not in failed and self.router.is_down(preferred):
                    failed.append(preferred.name)
            reason = why if not failed else f"{why}; fell back from {', '.join(failed)}"
            if endpoint is not self.current:
                log.info("model.route", task=self.task_id, endpoint=endpoint.name, reason=reason)
            self.current = endpoint
            done.route = Route(endpoint=endpoint.name, reason=reason, fell_back_from=failed)
            return done
        raise AllEndpointsDown(
            f"every endpoint allowed for task {self.task_id!r} is down "
            f"({', '.join(failed)}); last error: {type(last).__name__}: {last}"
        ) from last


__all__ = ["DEFAULT_RULES", "AllEndpointsDown", "NoRoute", "RoutedModel", "Router", "Rule"]
