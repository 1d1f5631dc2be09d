"""The in-sandbox executor: a long-lived stdlib-only program that runs commands on request.

Its source is sent over stdin to a tiny ``python3 -c`` bootstrap, so nothing has to be
installed in the image. The first executor of a sandbox is started by the container's
entrypoint and reached through ``docker attach``; more (for concurrent commands, or after
one died) are started with ``docker exec``. It talks to the host over its stdin/stdout with
length-prefixed frames::

    frame = struct(">II", len(header_json), len(payload)) + header_json + payload

One request at a time per executor; the host opens a second executor when it needs a second
command to run concurrently. Keeping one process alive turns a command's cost from a
``docker exec`` (~50 ms: runc starts a process each time) into a fork in an already running
process (~1 ms).

This file must stay importable by any Python >= 3.6 with no third-party packages: it runs in
images we do not control. The host imports it too, for :class:`HeadTail`.
"""

import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time

PROTOCOL = 1
_FRAME = struct.Struct(">II")
_CHUNK = 65536
# After the command exits, keep reading its pipes this long: a background child that inherited
# them (``server &``) would otherwise make us wait forever, as subprocess.communicate does.
_LINGER_S = 0.25
_SHELLS = ("/bin/bash", "/usr/bin/bash", "/bin/sh")


class HeadTail(object):
    """Keeps the first and last bytes of a stream up to ``limit`` in all, counting the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, int(limit))
        self.head_limit = self.limit // 2
        self.tail_limit = self.limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_limit:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit:  # trim in batches, not per chunk
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def value(self) -> bytes:
        """The kept bytes; when bytes were dropped, a marker says how many and where."""
        if not self.truncated:
            return bytes(self.head) + bytes(self.tail)
        tail = bytes(self.tail[len(self.tail) - self.tail_limit :]) if self.tail_limit else b""
        elided = self.total - len(self.head) - len(tail)
        marker = ("\n[... agentenv: %d bytes elided ...]\n" % elided).encode()
        return bytes(self.head) + marker + tail


class _Input(object):
    """Buffered frame reader over fd 0 (never ``sys.stdin``: its read-ahead would hide data
    from ``select``)."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()
        self.eof = False

    def fill(self):
        data = os.read(self.fd, _CHUNK)
        if not data:
            self.eof = True
        self.buf += data

    def read_exact(self, n):
        while len(self.buf) < n:
            if self.eof:
                return None
            self.fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def pop_cancel(self):
        """Consume a complete cancel request at the head of the buffer, if there is one."""
        if len(self.buf) < _FRAME.size:
            return False
        hlen, plen = _FRAME.unpack(bytes(self.buf[: _FRAME.size]))
        end = _FRAME.size + hlen + plen
        if len(self.buf) < end:
            return False
        header = json.loads(bytes(self.buf[_FRAME.size : _FRAME.size + hlen]).decode("utf-8"))
        if header.get("op") != "cancel":
            return False
        del self.buf[:end]
        return True

    def read_frame(self):
        head = self.read_exact(_FRAME.size)
        if head is None:
            return None, None
        hlen, plen = _FRAME.unpack(head)
        header = self.read_exact(hlen)
        payload = self.read_exact(plen)
        if header is None or payload is None:
            return None, None
        return json.loads(header.decode("utf-8")), payload


def _write_frame(header, payload=b""):
    data = json.dumps(header).encode("utf-8")
    buf = memoryview(_FRAME.pack(len(data), len(payload)) + data + payload)
    while buf:
        n = os.write(1, buf)
        buf = buf[n:]


def _children_map():
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(name))
    return children


def _descendants(root):
    children = _children_map()
    out, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            out.append(child)
            stack.append(child)
    return out


def kill_tree(pid):
    """SIGKILL a command's whole tree: its process group and every descendant, even those
    that moved to a group of their own. Repeats while new processes keep appearing (a fork
    bomb forks while we kill)."""
    for _ in range(50):
        victims = _descendants(pid)
        for target in [pid, *victims]:
            try:
                os.killpg(target, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass
        if not victims:
            return
        time.sleep(0.01)


def _oom_kills():
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except (OSError, ValueError):
            continue
    return None


def _shell():
    for path in _SHELLS:
        if os.access(path, os.X_OK):
            return path
    return "sh"


def _result(exit_code, out, err, started, timed_out=False, oom_killed=False):
    stdout, stderr = out.value(), err.value()
    header = {
        "type": "result",
        "exit_code": exit_code,
        "timed_out": timed_out,
        "truncated": out.truncated or err.truncated,
        "oom_killed": oom_killed,
        "duration_s": time.monotonic() - started,
        "stdout_len": len(stdout),
    }
    _write_frame(header, stdout + stderr)


def _feed(pipe, data):
    try:
        pipe.write(data)
    except OSError:  # the command exited without reading all of it
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def do_exec(req, stdin_data, inp):
    started = time.monotonic()
    limit = int(req.get("max_output") or 1 << 20)
    out, err = HeadTail(limit), HeadTail(limit)
    argv = req.get("argv") or [_shell(), "-c", req["shell"]]
    cwd = req.get("cwd")
    env = dict(os.environ)
    env.update(req.get("env") or {})
    if cwd and not os.path.isdir(cwd):
        err.add(("agentenv: working directory %r does not exist\n" % cwd).encode())
        return _result(1, out, err, started)
    ooms = _oom_kills()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd or None,
            env=env,
            stdin=subprocess.PIPE if req.get("stdin") else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # the command's group is ours to kill on timeout
        )
    except OSError as e:
        code = 127 if isinstance(e, FileNotFoundError) else 126
        err.add(("agentenv: cannot run %r: %s\n" % (argv[0], e.strerror or e)).encode())
        return _result(code, out, err, started)
    if req.get("stdin"):
        threading.Thread(target=_feed, args=(proc.stdin, stdin_data), daemon=True).start()
    timeout = req.get("timeout")
    deadline = started + float(timeout) if timeout else None
    stream = bool(req.get("stream"))
    pipes = {proc.stdout.fileno(): (1, out), proc.stderr.fileno(): (2, err)}
    open_fds = set(pipes)
    timed_out = False
    exited_at = None
    while open_fds:
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > _LINGER_S:
            break
        if deadline is not None and now >= deadline and not timed_out:
            kill_tree(proc.pid)
            timed_out = True
            exited_at = exited_at or now
        wait = 0.05
        if deadline is not None and not timed_out:
            wait = min(wait, max(0.0, deadline - now))
        ready, _, _ = select.select([*open_fds, inp.fd], [], [], wait)
        for fd in ready:
            if fd == inp.fd:
                inp.fill()
                if inp.eof:  # the host went away (cancelled): leave nothing behind
                    kill_tree(proc.pid)
                    sys.exit(0)
                if inp.pop_cancel() and not timed_out:
                    kill_tree(proc.pid)
                    timed_out = True
                    exited_at = exited_at or time.monotonic()
                continue
            data = os.read(fd, _CHUNK)
            if not data:
                open_fds.discard(fd)
                continue
            which, sink = pipes[fd]
            sink.add(data)
            if stream:
                _write_frame({"type": "chunk", "fd": which}, data)
    proc.stdout.close()
    proc.stderr.close()
    if timed_out:
        kill_tree(proc.pid)
    code = proc.wait()
    if code < 0:
        code = 128 - code  # shell convention: killed by signal N -> 128 + N
    if timed_out:
        code = 124  # as GNU timeout reports it
    after = _oom_kills()
    oom = ooms is not None and after is not None and after > ooms and code == 137
    return _result(code, out, err, started, timed_out=timed_out, oom_killed=oom)


def do_read(req):
    with open(req["path"], "rb") as f:
        data = f.read()
    _write_frame({"type": "result", "size": len(data)}, data)


def do_write(req, payload):
    path = req["path"]
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent)
    tmp = "%s.agentenv-%d.tmp" % (path, os.getpid())
    # Write then rename, so a reader never sees half a file.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, int(req.get("mode", 0o644)))
    finally:
        os.close(fd)
    try:
        os.rename(tmp, path)
    except OSError:
        os.unlink(tmp)
        raise
    _write_frame({"type": "result"})


def main():
    # SIGPIPE stays ignored (Python's default) here: a command that stops reading its stdin
    # must not kill us through the thread feeding it. Commands get the default back (Popen).
    for name in ("AGENTENV_BOOT", "AGENTENV_PY", "AGENTENV_SIZE"):  # the entrypoint's, not theirs
        os.environ.pop(name, None)
    inp = _Input(0)
    while True:
        req, payload = inp.read_frame()
        if req is None:
            return
        op = req.get("op")
        try:
            if op == "exec":
                do_exec(req, payload, inp)
            elif op == "read":
                do_read(req)
            elif op == "write":
                do_write(req, payload)
            elif op == "cancel":
                continue  # for a command that had already finished: nothing to do
            elif op == "ping":
                _write_frame({"type": "result", "protocol": PROTOCOL, "pid": os.getpid()})
            else:
                raise ValueError("unknown op %r" % op)
        except (OSError, ValueError, KeyError) as e:
            _write_frame(
                {
                    "type": "error",
                    "error": type(e).__name__,
                    "errno": getattr(e, "errno", None),
                    "message": str(e),
                }
            )


if __name__ == "__main__":
    main()
