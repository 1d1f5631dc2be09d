"""The fallback exec path: one ``docker exec`` per command, for images without ``python3``.

About 50 ms a command instead of about one, but it needs nothing but ``/bin/sh`` in the image.
A small shell wrapper gives it the fast path's behaviour: working directory, bash when there
is one, and a timeout that kills the command's process group (GNU ``timeout`` signals its
whole group).
"""

from __future__ import annotations

import contextlib
import inspect
import time
import uuid

import anyio

from agentenv.guest.executor import HeadTail
from agentenv.sandbox.channel import StreamClosed
from agentenv.sandbox.docker.engine import Engine
from agentenv.sandbox.docker.stream import STDERR, DockerStream
from agentenv.sandbox.protocol import ExecResult, OutputCallback

_WRAPPER = r"""
if [ -n "$AGENTENV_CWD" ]; then
  cd -- "$AGENTENV_CWD" 2>/dev/null || {
    printf "agentenv: working directory '%s' does not exist\n" "$AGENTENV_CWD" >&2; exit 1; }
fi
t=$AGENTENV_TIMEOUT; unset AGENTENV_CWD AGENTENV_TIMEOUT
if [ "$1" = shell ]; then
  if [ -x /bin/bash ]; then set -- /bin/bash -c "$2"; else set -- /bin/sh -c "$2"; fi
else
  shift
  # a program named by path that cannot be executed: said in words the host turns into
  # PermissionError (a launch failure, not the command's output)
  case $1 in */*)
    if [ -d "$1" ] || { [ -e "$1" ] && [ ! -x "$1" ]; }; then
      printf 'agentenv: cannot execute\n' >&2; exit 126
    fi;;
  esac
fi
# GNU timeout makes the command's process group (0 disables the limit, not the group).
if command -v timeout >/dev/null 2>&1; then exec timeout -k 1 "${t:-0}" "$@"; fi
exec "$@"
"""
CANNOT_EXECUTE = b"agentenv: cannot execute"
"""What the wrapper says (exit 126) when an argv's program is not executable."""
# Run on cancellation: kill every process whose environment carries this exec's tag (the
# command, its children, even those that left its process group), with their groups.
_KILLER = r"""
for e in /proc/[0-9]*/environ; do
  if tr '\0' '\n' < "$e" 2>/dev/null | grep -qx "AGENTENV_EXEC=$1"; then
    p=${e#/proc/}; p=${p%/environ}
    kill -KILL -"$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
  fi
done
exit 0
"""
# Past the command's own timeout, how long we wait before giving up on the stream.
_GRACE_S = 5.0


async def _kill_tagged(engine: Engine, container_id: str, tag: str) -> None:
    exec_id = await engine.run(
        engine.api.exec_create, container_id, ["/bin/sh", "-c", _KILLER, "agentenv-kill", tag]
    )
    await engine.run(engine.api.exec_start, exec_id)


async def run(
    engine: Engine,
    container_id: str,
    cmd: str | list[str],
    *,
    user: str | None,
    workdir: str,
    timeout: float | None,
    cwd: str | None,
    env: dict[str, str] | None,
    stdin: bytes | None,
    max_output: int,
    on_output: OutputCallback | None,
) -> ExecResult:
    """Run one command with its own ``docker exec``."""
    started = time.monotonic()
    args = ["shell", cmd] if isinstance(cmd, str) else ["argv", *cmd]
    environment = dict(env or {})
    environment["AGENTENV_CWD"] = cwd or ""
    environment["AGENTENV_TIMEOUT"] = f"{timeout:.3f}" if timeout else ""
    environment["AGENTENV_EXEC"] = tag = uuid.uuid4().hex
    exec_id = await engine.run(
        engine.api.exec_create,
        container_id,
        ["/bin/sh", "-c", _WRAPPER, "agentenv-exec", *args],
        stdin=stdin is not None,
        user=user or "",
        workdir=workdir,
        environment=environment,
    )
    stream = DockerStream(await engine.run(engine.api.exec_start, exec_id, socket=True))
    out, err = HeadTail(max_output), HeadTail(max_output)
    timed_out = False
    callback_error: list[BaseException] = []

    async def feed(data: bytes) -> None:
        # Concurrently with reading: a command may write a lot before it reads its input.
        with contextlib.suppress(StreamClosed):  # it exited without reading all of it
            await stream.send(data)
        stream.shutdown_stdin()

    try:
        with anyio.move_on_after(timeout + _GRACE_S if timeout else None) as scope:
            async with anyio.create_task_group() as tg:
                if stdin is not None:
                    tg.start_soon(feed, stdin)
                while True:
                    try:
                        await stream.receive()
                    except StreamClosed:
                        break
                    for fd, buf, sink in ((1, stream.stdout, out), (STDERR, stream.stderr, err)):
                        if buf:
                            chunk = bytes(buf)
                            buf.clear()
                            sink.add(chunk)
                            if on_output is not None:
                                try:
                                    maybe = on_output("stdout" if fd == 1 else "stderr", chunk)
                                    if inspect.isawaitable(maybe):
                                        await maybe
                                except Exception as e:  # raised as is below, not grouped
                                    callback_error.append(e)
                                    on_output = None
                tg.cancel_scope.cancel()  # output is over: stop feeding input nobody reads
        timed_out = scope.cancelled_caught
    except BaseException:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await _kill_tagged(engine, container_id, tag)
        raise
    finally:
        stream.close()
    if callback_error:
        raise callback_error[0]
    info = await engine.run(engine.api.exec_inspect, exec_id)
    code = info.get("ExitCode")
    if code is None and not timed_out:
        raise StreamClosed("the command's exec ended without an exit code")
    elapsed = time.monotonic() - started
    if timeout and (code in (124, 137) and elapsed >= timeout * 0.95):
        timed_out = True
    if timed_out:  # `timeout` killed its group; offspring that left it carry the tag
        await _kill_tagged(engine, container_id, tag)
    return ExecResult(
        exit_code=124 if code is None else int(code),
        stdout_bytes=out.value(),
        stderr_bytes=err.value(),
        duration_s=elapsed,
        timed_out=timed_out,
        truncated=out.truncated or err.truncated,
    )
