"""One episode's model gateway: a Unix socket a harness in the sandbox calls as its API
endpoint. Each call is authenticated by the episode's token, checked against the budgets,
and answered by the episode's :class:`~agentenv.model.types.ChatModel` (router, retries and
fallback as for the built-in loop) with the sandbox frozen meanwhile; the turn goes into
the :class:`~agentenv.agent.trajectory.Trajectory` through the loop's own
:func:`~agentenv.agent.loop.record_turn`."""

from __future__ import annotations

import hmac
import json
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from agentenv.agent.loop import limit_reached, record_turn
from agentenv.agent.trajectory import Limits, StopReason, Trajectory
from agentenv.errors import BadRequest, ContextOverflow, EndpointUnavailable, ModelError
from agentenv.gateway.dialect import Call, Dialect, DialectError, dialect, dialect_names
from agentenv.gateway.estimate import count_tokens_answer
from agentenv.gateway.replay import Replay
from agentenv.gateway.server import Request, Response, serve_unix
from agentenv.log import get_logger
from agentenv.model.client import EventCallback
from agentenv.model.types import ChatModel, Completion
from agentenv.sandbox.protocol import Sandbox

log = get_logger(__name__)

SOCKET_NAME = "gateway.sock"
MODELS_PATHS = ("/v1/models", "/models")
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
_UNIX_PATH_MAX = 107  # sun_path is 108 bytes with its NUL


class Gateway:
    """The gateway of one episode (made by :func:`open_gateway`)."""

    def __init__(
        self,
        model: ChatModel,
        trajectory: Trajectory,
        *,
        socket_path: Path,
        sandbox: Sandbox | None,
        limits: Limits,
        pause: bool = True,
        on_event: EventCallback | None = None,
        policy_version: int | str | None = None,
        token: str | None = None,
    ):
        self.socket_path = socket_path  # listening Unix socket (mode 0666; its folder 0755)
        # the episode's secret, never a real key; given: a resumed episode's harness has it
        self.token = token or secrets.token_urlsafe(32)
        self.stopped = anyio.Event()  # the session ended: a budget, the context, or an error
        self.stop_reason: StopReason | None = None
        self.error: Exception | None = None  # the endpoint (or the sandbox) failed for good
        self.calls = 0  # model calls answered
        self.model_s = 0.0  # time in model calls (overlapping calls counted once each)
        self._model = model
        self._trajectory = trajectory
        self._sandbox = sandbox
        self._limits = limits
        self._pause = pause and sandbox is not None
        self._on_event = on_event
        self._policy_version = policy_version
        self._started = time.monotonic()
        self._answered: float | None = None  # when the last answer went out
        self._frozen = 0  # calls in flight holding the sandbox frozen
        self._freeze_lock = anyio.Lock()
        self._in_flight = 0  # calls admitted and not yet recorded
        # With a token or dollar budget, calls go one at a time, so that each check sees
        # the spend of the calls before it (calls at once would all pass the same check)
        self._serial = limits.max_output_tokens is not None or limits.max_cost_usd is not None
        self._spend_lock = anyio.Lock()
        self._replay = Replay()
        for m in trajectory.messages:  # a resumed episode: its turns so far come back too
            if m.get("role") == "assistant":
                self._replay.remember(m)
        self._dialects: dict[str, Dialect] = {}
        for name in dialect_names():
            d = dialect(name)
            for path in d.paths:
                self._dialects[path] = d
        self.model_name = model_name(model)

    @property
    def base_path(self) -> str:
        """The API root a harness is given (``<forwarded origin>/v1``)."""
        return "/v1"

    # -- the session's end -----------------------------------------------------------------

    def _stop(self, reason: StopReason) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self._trajectory.stop_reason = reason
        self.stopped.set()

    def _fail(self, error: Exception) -> None:
        if self.error is None:
            self.error = error
            self._trajectory.error = f"{type(error).__name__}: {error}"
        self.stopped.set()

    def close(self) -> None:
        """Charge the harness's time since the last answer to the last turn's ``tools_s``."""
        self._charge_tools(time.monotonic())
        self._trajectory.wall_s = time.monotonic() - self._started

    def _charge_tools(self, now: float) -> None:
        # the harness's time between an answer and the next call is its tools' time, as the
        # built-in loop counts tools_s after the answer of its turn
        if self._answered is not None and self._trajectory.turns:
            self._trajectory.turns[-1].tools_s += now - self._answered
            self._answered = None

    # -- one request -----------------------------------------------------------------------

    def _dialect_for(self, request: Request) -> Dialect:
        found = self._dialects.get(request.path.rstrip("/") or "/")
        if found is not None:
            return found
        anthropic = request.path.startswith("/v1/messages") or "anthropic-version" in (
            request.headers
        )
        return dialect("anthropic" if anthropic else "chat")

    def _authorized(self, request: Request) -> bool:
        given = request.headers.get("x-api-key", "")
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            given = given or bearer[7:].strip()
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    async def handle(self, request: Request) -> Response:
        """The answer to one HTTP request of the harness."""
        path = request.path.rstrip("/") or "/"
        d = self._dialect_for(request)

        def refuse(status: int, message: str, **headers: str) -> Response:
            return Response(status, d.error(status, message), headers=headers)

        if not self._authorized(request):
            return refuse(
                401,
                "missing or wrong API key: send the episode's gateway token as "
                "'Authorization: Bearer <token>' or 'x-api-key: <token>'",
            )
        if path in MODELS_PATHS:
            if request.method != "GET":
                return refuse(405, f"{path} answers GET only", allow="GET")
            return Response(200, self._models())
        if path != COUNT_TOKENS_PATH and path not in self._dialects:
            known = sorted({*self._dialects, *MODELS_PATHS, COUNT_TOKENS_PATH})
            return refuse(404, f"no route {request.path}; the gateway answers {', '.join(known)}")
        if request.method != "POST":
            return refuse(405, f"{path} answers POST only", allow="POST")
        try:
            body = json.loads(request.body)
            if not isinstance(body, dict):
                raise DialectError("the request body must be a JSON object")
            if path == COUNT_TOKENS_PATH:
                return Response(200, count_tokens_answer(d.parse(body)))
            call = d.parse(body)
        except ValueError as e:  # json's and our own
            return refuse(400, f"invalid request: {e}")
        except DialectError as e:
            return refuse(400, str(e))
        return await self._call(d, call)

    def _models(self) -> dict[str, Any]:
        # both OpenAI's and Anthropic's list shapes, so that either client reads it
        entry = {
            "id": self.model_name,
            "object": "model",
            "created": 0,
            "owned_by": "agentenv",
            "type": "model",
            "display_name": self.model_name,
            "created_at": "1970-01-01T00:00:00Z",
        }
        return {
            "object": "list",
            "data": [entry],
            "has_more": False,
            "first_id": self.model_name,
            "last_id": self.model_name,
        }

    def _over_budget(self, now: float) -> StopReason | None:
        # calls in flight count as turns: a harness (or an agent holding the token) firing
        # calls at once must not get past max_turns
        if len(self._trajectory.turns) + self._in_flight >= self._limits.max_turns:
            return "max_turns"
        return limit_reached(self._trajectory, self._limits, now - self._started)

    async def _call(self, d: Dialect, call: Call) -> Response:
        if self.error is not None:
            return Response(
                503, d.error(503, f"the model endpoint failed; the episode is over: {self.error}")
            )
        if not self._serial:
            return await self._admitted(d, call)
        async with self._spend_lock:
            return await self._admitted(d, call)

    async def _admitted(self, d: Dialect, call: Call) -> Response:
        arrived = time.monotonic()
        reason = self.stop_reason or self._over_budget(arrived)
        if reason is not None:
            self._stop(reason)
            return Response(
                400, d.error(400, f"{reason}: the episode's budget is spent; stop here")
            )
        self._in_flight += 1  # no await since the check: admitted atomically
        try:
            return await self._answer(d, call, arrived)
        finally:
            self._in_flight -= 1

    async def _answer(self, d: Dialect, call: Call, arrived: float) -> Response:
        self._charge_tools(arrived)
        messages = self._replay.restore(call.messages)
        try:
            done, model_s = await self._complete(messages, call)
        except ContextOverflow as e:
            self._stop("context_length")
            return Response(
                400,
                d.error(
                    400,
                    "context_length_exceeded: prompt is too long for the model's context window: "
                    f"{e}",
                ),
            )
        except EndpointUnavailable as e:
            self._fail(e)
            return Response(503, d.error(503, f"the model endpoint is unavailable: {e}"))
        except (BadRequest, ModelError) as e:
            self._fail(e)
            return Response(502, d.error(502, f"the model endpoint refused the call: {e}"))
        except _SandboxFailed as e:
            self._fail(e.error)
            return Response(503, d.error(503, f"the sandbox failed: {e.error}"))
        except _OutOfTime as e:
            self.model_s += e.model_s
            self._stop("wall_time")
            return Response(
                400,
                d.error(400, "wall_time: the episode's time ran out during this call; stop here"),
            )
        self._trajectory.messages = list(messages)
        turn = record_turn(
            self._trajectory,
            done,
            model_s=model_s,
            paused_s=model_s if self._pause else 0.0,
            policy_version=self._policy_version,
        )
        self._trajectory.turns.append(turn)
        self._replay.remember(self._trajectory.messages[-1])
        self.calls += 1
        self.model_s += model_s
        self._answered = time.monotonic()
        if call.stream:
            return Response(200, frames=d.events(done, call))
        return Response(200, d.answer(done, call))

    async def _complete(
        self, messages: list[dict[str, Any]], call: Call
    ) -> tuple[Completion, float]:
        """The model's answer with the sandbox frozen meanwhile, and the time it took; cut
        (:class:`_OutOfTime`) when the episode's wall time runs out first: a harness must
        not act on an answer that came after its time, nor the sandbox stay frozen past it."""
        t0 = time.monotonic()
        left = None
        if self._limits.wall_time_s is not None:
            left = max(0.0, self._limits.wall_time_s - (t0 - self._started))
        await self._freeze()
        done = None
        try:
            with anyio.move_on_after(left):
                done = await self._model.complete(
                    messages, call.tools or None, on_event=self._on_event
                )
        finally:
            thawed = await self._thaw()
        if thawed is not None:
            raise _SandboxFailed(thawed)
        if done is None:
            raise _OutOfTime(time.monotonic() - t0)
        return done, time.monotonic() - t0

    async def _freeze(self) -> None:
        if not self._pause:
            return
        assert self._sandbox is not None
        try:
            async with self._freeze_lock:
                if self._frozen == 0:
                    await self._sandbox.pause()
                self._frozen += 1
        except Exception as e:
            raise _SandboxFailed(e) from e

    async def _thaw(self) -> Exception | None:
        """Thaw when the last call in flight ends; even when cancelled. A failure is
        returned (and ends the session), never raised into the connection's task."""
        if not self._pause:
            return None
        assert self._sandbox is not None
        with anyio.CancelScope(shield=True):
            async with self._freeze_lock:
                self._frozen -= 1
                if self._frozen:
                    return None
                try:
                    await self._sandbox.resume()
                except Exception as e:
                    log.error("the gateway could not thaw the sandbox: %s", e)
                    self._fail(e)
                    return e
        return None


def model_name(model: object) -> str:
    """The name ``model`` answers to: its ``model`` attribute, looked for through wrappers
    that hold the model they count (``Metered``); ``kimi-k3`` when it has none."""
    for _ in range(8):
        found = getattr(model, "model", None)
        if isinstance(found, str):
            return found or "kimi-k3"
        if found is None:
            break
        model = found
    return "kimi-k3"


class _OutOfTime(Exception):
    """The episode's wall time ran out during a model call (``model_s`` into it)."""

    def __init__(self, model_s: float):
        super().__init__(f"out of time after {model_s:.1f} s")
        self.model_s = model_s


class _SandboxFailed(Exception):
    """Freezing or thawing the sandbox failed: the session ends with ``error``."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


@asynccontextmanager
async def open_gateway(
    model: ChatModel,
    trajectory: Trajectory,
    *,
    socket_dir: Path,
    sandbox: Sandbox | None,
    limits: Limits,
    pause: bool = True,
    on_event: EventCallback | None = None,
    policy_version: int | str | None = None,
    token: str | None = None,
) -> AsyncIterator[Gateway]:
    """Listen on ``socket_dir/gateway.sock`` for one episode's harness; closed (and calls
    in flight cancelled, the sandbox thawed) on exit. ``trajectory`` is where its turns
    go (a resumed episode's too: its assistant turns are replayed as they were);
    ``sandbox`` is frozen for each call when ``pause``, through its ``pause``/``resume``.
    ``token`` is the harness's secret (default: a new random one; a resumed episode passes
    the one its running harness holds). A call in flight when it closes is cancelled: no
    turn recorded, its connection closed without an answer."""
    socket_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(socket_dir, 0o755)
    path = socket_dir / SOCKET_NAME
    if len(os.fsencode(path)) > _UNIX_PATH_MAX:
        raise ValueError(
            f"the gateway's socket path {path} is longer than a Unix socket's limit "
            f"({_UNIX_PATH_MAX} bytes): give a shorter socket_dir"
        )
    path.unlink(missing_ok=True)
    gateway = Gateway(
        model,
        trajectory,
        socket_path=path,
        sandbox=sandbox,
        limits=limits,
        pause=pause,
        on_event=on_event,
        policy_version=policy_version,
        token=token,
    )
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(socket.SOMAXCONN)  # a harness may open many connections at once
    os.chmod(path, 0o666)  # the sandbox's user connects; the token is the gate

    def refuse(status: int, message: str) -> Response:
        return Response(status, dialect("chat").error(status, message))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_unix, sock, gateway.handle, refuse)
            try:
                yield gateway
            finally:
                tg.cancel_scope.cancel()
    finally:
        sock.close()
        gateway.close()
        path.unlink(missing_ok=True)


__all__ = ["Gateway", "open_gateway"]
