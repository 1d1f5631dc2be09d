"""A small HTTP/1.1 server on a byte stream (the gateway's Unix socket), on ``h11``: one
task a connection, requests answered in turn on a kept-alive connection, bodies whole or
as a chunked event stream. It knows nothing of models: a handler turns a :class:`Request`
into a :class:`Response`."""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import h11
from anyio.abc import ByteStream, SocketStream

from agentenv.log import get_logger

log = get_logger(__name__)

MAX_BODY = 16 << 20  # a harness's whole conversation; more is a broken client (or an attack)
# Open connections per gateway: past it, new ones wait in the kernel's backlog (no fd of
# ours), so a flood from the sandbox cannot take the job's file descriptors. Harnesses keep
# a few pooled connections.
MAX_CONNECTIONS = 64
_SHORT_OF = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
READ_SIZE = 1 << 16


@dataclass
class Request:
    """One HTTP request, its body read whole. Header names are lower case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Response:
    """An answer: a JSON ``body``, or ``frames`` (server-sent events) sent chunked."""

    status: int
    body: dict[str, Any] | None = None
    frames: list[bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]
Overflow = Callable[[int, str], Response]  # status, message -> an error answer


class _Closed(Exception):
    """The peer went away, or spoke something that is not HTTP/1.1."""


async def serve_connection(stream: ByteStream, handler: Handler, refuse: Overflow) -> None:
    """Answer requests on ``stream`` until the client closes it (keep-alive). ``refuse``
    builds the answer to a request this layer rejects (too large, not HTTP)."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=1 << 20)
    try:
        async with stream:
            while True:
                try:
                    request = await _read(conn, stream)
                except h11.RemoteProtocolError as e:
                    if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                        await _send(conn, stream, refuse(400, f"not HTTP/1.1: {e}"))
                    return
                except _TooLarge:
                    await _send(conn, stream, refuse(413, f"the body exceeds {MAX_BODY} bytes"))
                    return
                if request is None:
                    return
                try:
                    response = await handler(request)
                except Exception as e:  # a bug of ours: the harness still gets an answer
                    log.exception(f"gateway handler failed on {request.method} {request.path}")
                    response = refuse(500, f"the gateway failed: {type(e).__name__}: {e}")
                await _send(conn, stream, response)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return  # the client asked to close, or did not read its answer
                conn.start_next_cycle()
    except (_Closed, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        return


class _TooLarge(Exception):
    pass


async def serve_unix(sock: socket.socket, handler: Handler, refuse: Overflow) -> None:
    """Accept connections on the listening Unix socket ``sock`` and serve each in its own
    task (at most :data:`MAX_CONNECTIONS` at once), until cancelled. (anyio's own Unix
    listener and Unix streams can set a reader's future twice when cancelled as the peer
    closes: an ``InvalidStateError`` in the loop; this waits for readability, which is
    safe, and streams over the loop's transports.)"""
    sock.setblocking(False)
    slots = anyio.Semaphore(MAX_CONNECTIONS)

    async def serve(stream: ByteStream) -> None:
        try:
            await serve_connection(stream, handler, refuse)
        finally:
            slots.release()

    async with anyio.create_task_group() as tg:
        while True:
            await slots.acquire()
            try:
                client = await _accept(sock)
                stream = await SocketStream.from_socket(client)
            except BaseException:
                slots.release()
                raise
            tg.start_soon(serve, stream)


async def _accept(sock: socket.socket) -> socket.socket:
    """The next connection; out of descriptors or memory, wait and try again (the
    connection waits in the backlog) rather than end the gateway."""
    while True:
        await anyio.wait_readable(sock)
        try:
            client, _ = sock.accept()
        except (BlockingIOError, InterruptedError):
            continue
        except OSError as e:
            if e.errno not in _SHORT_OF:
                raise
            log.warning(f"the gateway cannot accept a connection now: {e}")
            await anyio.sleep(0.1)
            continue
        client.setblocking(False)
        return client


async def _read(conn: h11.Connection, stream: ByteStream) -> Request | None:
    """The next request, or ``None`` when the client closed the connection between two."""
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive(READ_SIZE)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                data = b""
            if not data and head is None and conn.their_state is h11.IDLE:
                return None
            if not data and head is not None:
                raise _Closed("the client closed the connection mid-request")
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY:
                raise _TooLarge
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return Request(
                method=head.method.decode(),
                path=head.target.decode().split("?", 1)[0],
                headers={k.decode().lower(): v.decode("latin-1") for k, v in head.headers},
                body=bytes(body),
            )
        elif isinstance(event, h11.ConnectionClosed):
            return None
        else:  # h11.PAUSED: only after a response; not reached while reading
            raise _Closed(f"unexpected {event!r}")


async def _send(conn: h11.Connection, stream: ByteStream, response: Response) -> None:
    headers = [(k.encode(), v.encode()) for k, v in response.headers.items()]
    if response.frames is not None:
        headers += [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache"),
            (b"transfer-encoding", b"chunked"),
        ]
        payload = b"".join(response.frames)  # all there: one chunk, one write
    else:
        payload = json.dumps(response.body or {}, separators=(",", ":")).encode()
        headers += [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
        ]
    out = conn.send(h11.Response(status_code=response.status, headers=headers)) or b""
    if payload:
        out += conn.send(h11.Data(data=payload)) or b""
    out += conn.send(h11.EndOfMessage()) or b""
    await stream.send(out)


__all__ = ["Handler", "Request", "Response", "serve_connection", "serve_unix"]
