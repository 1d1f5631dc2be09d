"""A dead or wrong endpoint is known in seconds: garbage answers are endpoint errors quoting
what came back (never a crash), connection failures in a row open the endpoint's breaker,
and a probe before a job says whether anybody is there."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agentenv.errors import EndpointDown, EndpointUnavailable, MalformedAnswer
from agentenv.model import OpenAIChatModel
from agentenv.model.breaker import Breaker
from agentenv.model.endpoints import resolve_endpoint
from agentenv.model.router import Router
from agentenv.runner.outcomes import classify
from agentenv.testing import Fault, K3Server, ScriptedTurn
from tests.helpers import chat_model, serving

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]

ANSWER = [ScriptedTurn(reasoning="thinking", content="the answer")]
HELLO = [{"role": "user", "content": "hello"}]
FIRST_LINES = {
    "html": "<!DOCTYPE html>",
    "bad_utf8": "data: \\xff\\xfe",
    "bad_json": "data: {choices: [",
    "bad_shape": 'data: {"id": "x", "choices": "none"}',
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("kind", sorted(FIRST_LINES))
async def test_an_answer_that_is_not_the_wire_format_is_an_endpoint_error_quoting_it(
    kind: str, transport: str
) -> None:
    faults = [Fault(kind=kind)]  # type: ignore[arg-type]
    with serving(K3Server(ANSWER, faults=faults), transport) as server:
        chat = chat_model(server, transport, max_attempts=1)
        try:
            with pytest.raises(MalformedAnswer) as info:
                await chat.complete(HELLO)
            # once answered properly, the same client goes on (the fault was one request)
            assert (await chat.complete(HELLO)).content == "the answer"
        finally:
            await chat.aclose()
    assert FIRST_LINES[kind] in str(info.value)
    assert "HTTP 200" in str(info.value)
    assert classify(info.value) == "endpoint_down"  # a job retries it, never a crash


@pytest.fixture
def not_http() -> Iterator[str]:
    """A TCP server that answers every connection with a line of another protocol."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\nProtocol mismatch.\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    thread.join()
    listener.close()


async def test_a_server_of_another_protocol_is_a_malformed_answer(not_http: str) -> None:
    chat = OpenAIChatModel(base_url=not_http, api_key="k", max_attempts=1)
    try:
        with pytest.raises(MalformedAnswer, match=r"not HTTP.*SSH-2\.0"):
            await chat.complete(HELLO)
    finally:
        await chat.aclose()


async def test_connection_failures_in_a_row_open_the_breaker_and_it_closes_on_an_answer() -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    breaker = Breaker(url, threshold=3, min_span_s=0, cooldown_s=0.5)
    # ten attempts allowed, but the breaker stops the retries at its threshold
    chat = OpenAIChatModel(
        base_url=url, api_key="k", max_attempts=10, backoff_initial_s=0.01, breaker=breaker
    )
    try:
        with pytest.raises(EndpointUnavailable, match="Connect"):
            await chat.complete(HELLO)
        assert chat.failed_requests == 3 and breaker.open
        # open: the next request fails at once, without a connection attempt
        with pytest.raises(EndpointDown, match=f"{url} does not answer"):
            await chat.complete(HELLO)
        assert chat.failed_requests == 3
        # after the cool-down one trial request goes through; an answer closes it
        with K3Server(ANSWER, port=port):
            while breaker.open:
                await _sleep(0.05)
            assert (await chat.complete(HELLO)).content == "the answer"
        assert not breaker.tripped and breaker.failures == 0
    finally:
        await chat.aclose()


async def test_a_server_that_is_there_but_failing_never_opens_the_breaker(transport: str) -> None:
    # 500s and cut streams come from a live server: retried by the client, not counted
    faults = [Fault(kind="500")] * 4 + [Fault(kind="cut")] * 4
    with serving(K3Server(ANSWER, faults=faults), transport) as server:
        chat = chat_model(server, transport, max_attempts=10, backoff_initial_s=0.01)
        chat.breaker.threshold = 2
        try:
            done = await chat.complete(HELLO)
        finally:
            await chat.aclose()
    assert done.retries == 8 and chat.failed_requests == 8
    assert not chat.breaker.tripped


async def _sleep(seconds: float) -> None:
    import anyio

    await anyio.sleep(seconds)


class _Canned(BaseHTTPRequestHandler):
    """Answers every request with the class's ``status``, ``kind`` and ``body``."""

    status, kind, body = 200, "application/json", b"{}"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", self.kind)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


@pytest.fixture
def canned() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(status: int, kind: str, body: bytes) -> str:
        handler = type("H", (_Canned,), {"status": status, "kind": kind, "body": body})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/v1"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


async def test_the_probe_tells_dead_wrong_refused_and_up_apart(canned: Any) -> None:
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    html = canned(200, "text/html", b"<html>\n<title>router login</title>\n")
    refused = canned(401, "application/json", b'{"error": {"message": "Invalid key"}}')
    no_v1 = canned(404, "application/json", b'{"detail": "Not Found"}')
    with K3Server(ANSWER) as up:
        urls = [dead, html, refused, no_v1, up.base_url]
        router = Router([resolve_endpoint(u) for u in urls])
        found = {h.endpoint: h for h in await router.probe(timeout_s=5)}
        await router.aclose()
    assert not found[dead].up and "cannot be reached" in found[dead].detail
    assert not found[html].up and "'<html>'" in found[html].detail
    assert found[refused].auth_refused and "401" in found[refused].detail
    assert found[no_v1].up and "404" in found[no_v1].detail and "/v1" in found[no_v1].detail
    assert found[up.base_url].up and found[up.base_url].detail == ""
    # the dead and the wrong are skipped from now on; the others are not
    by_url = {e.name: e for e in router.endpoints}
    assert router.is_down(by_url[dead]) and router.is_down(by_url[html])
    assert not router.is_down(by_url[up.base_url]) and not router.is_down(by_url[no_v1])
    assert router.down() is None  # some endpoint still answers


def test_a_burst_of_refusals_does_not_open_the_breaker_but_refusals_that_last_do() -> None:
    clock = [100.0]
    breaker = Breaker("http://gpu:8000/v1", threshold=3, min_span_s=5.0, clock=lambda: clock[0])
    for _ in range(10):  # ten refusals in one instant: a listen queue overflowing
        breaker.failed("ConnectError: connection refused")
    assert not breaker.open
    clock[0] += 5.0  # still refused 5 s later: nobody is there
    breaker.failed("ConnectError: connection refused")
    assert breaker.open and "connection refused" in breaker.describe()
    clock[0] += 30.0  # cooled down: a trial may go; its answer closes the breaker
    assert not breaker.open and breaker.tripped
    breaker.succeeded()
    assert not breaker.tripped
