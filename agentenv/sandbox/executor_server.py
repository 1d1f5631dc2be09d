"""The in-sandbox executor: a long-lived stdlib-only program that runs commands on request.

It is started with ``docker exec`` and its source is sent over stdin to a tiny
``python3 -c`` bootstrap, so nothing has to be installed in the image. It makes itself
non-dumpable so that no process in the sandbox can open its pipes through ``/proc``, and
talks to the host over its stdin/stdout with length-prefixed frames::

    frame = struct(">II", len(header_json), len(payload)) + header_json + payload

One request at a time per executor; the host opens a second executor when it needs a second
command to run concurrently. Keeping one process alive turns a command's cost from a
``docker exec`` (~50 ms: runc starts a process each time) into a fork in an already running
process (~1 ms).

This file must stay importable by any Python >= 3.6 with no third-party packages: it runs in
images we do not control. The host imports it too, for :class:`HeadTail`.
"""

import errno
import json
import os
import select
import signal
import stat
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


def _write_all(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def _write_frame(header, payload=b""):
    data = json.dumps(header).encode("utf-8")
    _write_all(_FRAME.pack(len(data), len(payload)) + data)
    if payload:
        _write_all(payload)


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


def _tagged(tag):
    """Processes whose environment carries ``AGENTENV_EXEC=<tag>``: a command's offspring
    even after they left its tree (double fork, setsid) and were adopted by PID 1."""
    if not tag:
        return []
    needle = ("AGENTENV_EXEC=%s\0" % tag).encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/environ" % name, "rb") as f:
                    if needle in f.read():
                        found.append(int(name))
            except OSError:
                continue
    return found


def kill_tree(pid, tag=None):
    """SIGKILL a command's whole tree: its process group, every descendant (even those that
    moved to a group of their own) and every process carrying its tag. Repeats while new
    processes keep appearing (a fork bomb forks while we kill)."""
    for _ in range(50):
        victims = set(_descendants(pid)) | set(_tagged(tag))
        victims.discard(os.getpid())
        for target in [pid, *sorted(victims)]:
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


def _become(uid, gid):
    """A preexec function dropping the child to ``uid:gid`` with no supplementary groups
    (the executor needs CAP_SETUID/CAP_SETGID to switch; with them it keeps none after)."""

    def drop():
        if os.getuid() == uid and os.getgid() == gid:
            return
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return drop


def do_exec(req, stdin_data, inp):
    started = time.monotonic()
    limit = req.get("max_output")
    limit = 1 << 20 if limit is None else int(limit)
    out, err = HeadTail(limit), HeadTail(limit)
    argv = req.get("argv") or [_shell(), "-c", req["shell"]]
    cwd = req.get("cwd")
    env = dict(os.environ)
    env.update(req.get("env") or {})
    tag = "%d-%d" % (os.getpid(), int(time.time() * 1e6))
    env["AGENTENV_EXEC"] = tag
    if cwd and not os.path.isdir(cwd):
        err.add(("agentenv: working directory %r does not exist\n" % cwd).encode())
        return _result(1, out, err, started)
    ooms = _oom_kills()
    preexec = None
    if req.get("user"):
        uid, _, gid = str(req["user"]).partition(":")
        if not uid.isdigit() or (gid and not gid.isdigit()):
            err.add(("agentenv: user must be numeric uid[:gid], got %r\n" % req["user"]).encode())
            return _result(126, out, err, started)
        preexec = _become(int(uid), int(gid or uid))
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd or None,
            env=env,
            stdin=subprocess.PIPE if req.get("stdin") else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # the command's group is ours to kill on timeout
            preexec_fn=preexec,
        )
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        # SubprocessError: the switch to another user failed (no CAP_SETUID here)
        code = 127 if isinstance(e, FileNotFoundError) else 126
        reason = getattr(e, "strerror", None) or e
        err.add(("agentenv: cannot run %r: %s\n" % (argv[0], reason)).encode())
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
    idle_wait = 0.0005
    # Until the command has exited and its pipes are drained (or have lingered long enough):
    # a command may close its output early and run on, so the deadline is checked regardless.
    while True:
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and (not open_fds or now - exited_at > _LINGER_S):
            break
        if deadline is not None and now >= deadline and not timed_out:
            kill_tree(proc.pid, tag)
            timed_out = True
        if open_fds:
            wait = 0.05  # the pipes wake us
        else:
            # Output closed but the process not yet reaped: nothing will wake us, so poll,
            # quickly at first (it is usually exiting), then less often (it may run on).
            idle_wait = min(idle_wait * 2, 0.05)
            wait = idle_wait
        if deadline is not None and not timed_out:
            wait = min(wait, max(0.0, deadline - now))
        ready, _, _ = select.select([*open_fds, inp.fd], [], [], wait)
        for fd in ready:
            if fd == inp.fd:
                inp.fill()
                if inp.eof:  # the host went away (cancelled): leave nothing behind
                    kill_tree(proc.pid, tag)
                    sys.exit(0)
                continue
            data = os.read(fd, _CHUNK)
            if not data:
                open_fds.discard(fd)
                continue
            which, sink = pipes[fd]
            sink.add(data)
            if stream:
                _write_frame({"type": "chunk", "fd": which}, data)
    # Whatever the command wrote before it exited is still in the pipes if we were slow
    # (starved of CPU): take it, without waiting for writers that live on in the background.
    for fd in open_fds:
        os.set_blocking(fd, False)
        which, sink = pipes[fd]
        for _ in range(64):
            try:
                data = os.read(fd, _CHUNK)
            except BlockingIOError:
                break
            if not data:
                break
            sink.add(data)
            if stream:
                _write_frame({"type": "chunk", "fd": which}, data)
    proc.stdout.close()
    proc.stderr.close()
    if timed_out:
        kill_tree(proc.pid, tag)
    code = proc.wait()
    if code < 0:
        code = 128 - code  # shell convention: killed by signal N -> 128 + N
    if timed_out:
        code = 124  # as GNU timeout reports it
    after = _oom_kills()
    oom = ooms is not None and after is not None and after > ooms and code == 137
    return _result(code, out, err, started, timed_out=timed_out, oom_killed=oom)


def do_read(req):
    # O_NONBLOCK: opening a FIFO an agent planted must not hang us; only regular files.
    fd = os.open(req["path"], os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", req["path"])
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", req["path"])
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
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


def _make_undumpable():
    """PR_SET_DUMPABLE 0: without CAP_SYS_PTRACE (all capabilities are dropped) no other
    process, root included, can open our /proc/<pid>/fd or memory, so a command cannot read
    the host's requests or forge our replies. Best effort where ctypes is missing."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
            raise OSError(ctypes.get_errno(), "prctl failed")
    except Exception as e:  # nothing else to do about it here
        sys.stderr.write("agentenv-executor: could not make itself undumpable: %s\n" % e)


def main():
    _make_undumpable()
    # Commands start with default dispositions whatever our parent left us. SIGPIPE stays
    # ignored for us (a command that stops reading its stdin must not kill the feeding
    # thread); Popen gives commands the default back.
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
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
            elif op == "ping":
                _write_frame({"type": "result", "protocol": PROTOCOL, "pid": os.getpid()})
            else:
                raise ValueError("unknown op %r" % op)
        except (OSError, ValueError, KeyError, TypeError) as e:
            _write_frame(
                {
                    "type": "error",
                    "error": type(e).__name__,
                    "errno": getattr(e, "errno", None),
                    "strerror": getattr(e, "strerror", None),
                    "filename": getattr(e, "filename", None),
                    "message": str(e),
                }
            )


if __name__ == "__main__":
    main()
