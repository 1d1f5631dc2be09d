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


def _text(name):
    """A file name for a JSON reply (bytes names are decoded, undecodable bytes replaced)."""
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else name


def _write_all(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def _write_frame(header, payload=b""):
    data = json.dumps(header).encode("utf-8")
    head = _FRAME.pack(len(data), len(payload)) + data
    if len(payload) <= _CHUNK:  # one write: the host wakes once per reply, not twice
        _write_all(head + payload)
        return
    _write_all(head)
    _write_all(payload)


def _children_map():
    children = {}  # type: dict[int, list[int]]
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


_OOM_FILES = ["/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"]


def _oom_kills():
    """The cgroup's OOM kill count (None where neither file says it). A file that is not
    there (cgroup v2's on a v1 host) is not tried again: this runs twice per command."""
    for path in list(_OOM_FILES):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except FileNotFoundError:
            _OOM_FILES.remove(path)
        except (OSError, ValueError):
            continue
    return None


def _exit_fd(pid):
    """A descriptor that becomes readable when process ``pid`` exits (a pidfd), or None where
    the kernel, the seccomp profile or the Python (< 3.9) has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
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


def _become(uid, gid, groups):
    """A preexec function dropping the child to ``uid:gid`` with ``groups`` as supplementary
    groups (the executor needs CAP_SETUID/CAP_SETGID to switch; with them it keeps none
    after)."""

    def drop():
        if os.getuid() == uid and os.getgid() == gid and sorted(os.getgroups()) == groups:
            return
        os.setgroups(groups)
        os.setgid(gid)
        os.setuid(uid)

    return drop


class UserError(Exception):
    """``exec(user=...)`` cannot run as that user: ``unknown`` (no such user or group in the
    sandbox) or ``not_permitted`` (this executor may not switch users)."""

    def __init__(self, reason, message):
        Exception.__init__(self, message)
        self.reason = reason


def _capable(*bits):
    """Whether this process holds every capability numbered in ``bits`` (effective set)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    eff = int(line.split()[1], 16)
                    return all(eff & (1 << b) for b in bits)
    except (OSError, ValueError):
        pass
    return False


def resolve_user(user):
    """``name``, ``uid``, ``name:group`` or ``uid:gid`` as ``(uid, gid, groups, home)``.

    Names are looked up in the sandbox's user database (``pwd``/``grp``: its /etc/passwd and
    /etc/group, root's files), never by running a program found through PATH. A name gets
    its primary group and the groups that list it, as ``docker exec --user`` gives; a bare
    numeric uid keeps agentenv's meaning (gid = uid, no supplementary groups)."""
    import grp
    import pwd

    name, _, group = str(user).partition(":")
    if not name or (":" in group):
        raise UserError("unknown", "agentenv: %r is not a user ('name', 'uid' or 'uid:gid')" % user)
    entry = None
    if name.isdigit():
        uid = int(name)
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            pass
        gid = uid
        groups = []
    else:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise UserError(
                "unknown", "agentenv: unable to find user %s: no such user in the sandbox" % name
            ) from None
        uid, gid = entry.pw_uid, entry.pw_gid
        try:
            groups = sorted(set(os.getgrouplist(name, gid)))
        except OSError:
            groups = [gid]
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            try:
                gid = grp.getgrnam(group).gr_gid
            except KeyError:
                raise UserError(
                    "unknown",
                    "agentenv: unable to find group %s: no such group in the sandbox" % group,
                ) from None
        if not name.isdigit():
            groups = sorted(set(groups) | set([gid]))
    home = entry.pw_dir if entry is not None else None
    return uid, gid, groups, home


def _switch_to(req, env):
    """The preexec function running the command as ``req["user"]`` (None: as we are), with
    ``HOME`` set in ``env`` as ``docker exec --user`` sets it."""
    if not req.get("user"):
        return None
    uid, gid, groups, home = resolve_user(req["user"])
    same = os.getuid() == uid and os.getgid() == gid and sorted(os.getgroups()) == groups
    if not same and not _capable(6, 7):  # CAP_SETGID, CAP_SETUID
        raise UserError(
            "not_permitted",
            "agentenv: cannot run as user %r: the sandbox may not switch users "
            "(its spec needs cap_add SETUID and SETGID, and a root default user)" % req["user"],
        )
    if home and "HOME" not in (req.get("env") or {}):
        env["HOME"] = home  # as `docker exec --user` sets it
    return _become(uid, gid, groups)


def _start(req, argv, cwd, env, preexec, err):
    """The command started (and None), or None and the exit code of a launch that failed,
    explained in ``err``."""
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
    except PermissionError:
        # Not executable (or a folder): a launch failure the caller gets typed, as a local
        # subprocess raises it; a shell string reports it as the shell does (126).
        raise
    except subprocess.SubprocessError as e:  # the preexec switch to another user failed
        raise UserError(
            "not_permitted", "agentenv: cannot run as user %r: %s" % (req["user"], e)
        ) from e
    except (OSError, ValueError) as e:
        code = 127 if isinstance(e, FileNotFoundError) else 126
        reason = getattr(e, "strerror", None) or e
        err.add(("agentenv: cannot run %r: %s\n" % (argv[0], reason)).encode())
        return None, code
    return proc, None


class _Running(object):
    """A started command whose output is gathered until it has exited and its pipes are
    drained (or have lingered long enough), each chunk sent on as it comes if ``stream``."""

    def __init__(self, proc, tag, out, err, stream):
        self.proc = proc
        self.tag = tag
        self.stream = stream
        self.pipes = {proc.stdout.fileno(): (1, out), proc.stderr.fileno(): (2, err)}
        self.open_fds = set(self.pipes)
        self.timed_out = False

    def _add(self, fd, data):
        which, sink = self.pipes[fd]
        sink.add(data)
        if self.stream:
            _write_frame({"type": "chunk", "fd": which}, data)

    def _take(self, ready, exit_fd, inp):
        for fd in ready:
            if fd == exit_fd:
                continue  # reaped at the top of the loop
            if fd == inp.fd:
                inp.fill()
                if inp.eof:  # the host went away (cancelled): leave nothing behind
                    kill_tree(self.proc.pid, self.tag)
                    sys.exit(0)
                continue
            data = os.read(fd, _CHUNK)
            if not data:
                self.open_fds.discard(fd)
                continue
            self._add(fd, data)

    def pump(self, inp, deadline):
        """Gather output until the command has exited and its pipes are drained (or have
        lingered long enough), killing it at ``deadline``. A command may close its output
        early and run on, so the deadline is checked regardless."""
        exited_at = None
        # The pipes close a moment before the exit can be reaped: a pidfd wakes us when it
        # can (polling instead made most commands wait a whole extra millisecond).
        exit_fd = _exit_fd(self.proc.pid)
        idle_wait = 0.00005
        while True:
            now = time.monotonic()
            if exited_at is None and self.proc.poll() is not None:
                exited_at = now
            if exited_at is not None and (not self.open_fds or now - exited_at > _LINGER_S):
                break
            if deadline is not None and now >= deadline and not self.timed_out:
                kill_tree(self.proc.pid, self.tag)
                self.timed_out = True
            exit_watched = exit_fd is not None and exited_at is None
            if self.open_fds or exit_watched:
                wait = 0.05  # the pipes or the exit wake us
            else:
                # Output closed but the process not yet reaped: nothing will wake us, so
                # poll, quickly at first (it is usually exiting), then less often (it may
                # run on).
                idle_wait = min(idle_wait * 2, 0.05)
                wait = idle_wait
            if deadline is not None and not self.timed_out:
                wait = min(wait, max(0.0, deadline - now))
            watched = [*self.open_fds, inp.fd]
            if exit_watched:
                watched.append(exit_fd)
            ready, _, _ = select.select(watched, [], [], wait)
            self._take(ready, exit_fd, inp)
        if exit_fd is not None:
            os.close(exit_fd)

    def drain(self):
        """Take whatever the command wrote before it exited that is still in the pipes (we
        were slow, starved of CPU), without waiting for writers living on in the
        background."""
        for fd in self.open_fds:
            os.set_blocking(fd, False)
            for _ in range(64):
                try:
                    data = os.read(fd, _CHUNK)
                except BlockingIOError:
                    break
                if not data:
                    break
                self._add(fd, data)

    def finish(self):
        """Close the pipes, reap the command and return its exit code as a shell gives it."""
        self.proc.stdout.close()
        self.proc.stderr.close()
        if self.timed_out:
            kill_tree(self.proc.pid, self.tag)
        code = self.proc.wait()
        if code < 0:
            code = 128 - code  # shell convention: killed by signal N -> 128 + N
        if self.timed_out:
            code = 124  # as GNU timeout reports it
        return code


def do_exec(req, stdin_data, inp):
    """Run the command ``req`` asks for (its stdin ``stdin_data``) and reply with its result,
    its output sent as it comes if asked; a host that goes away (``inp`` ends) kills it."""
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
    proc, failed = _start(req, argv, cwd, env, _switch_to(req, env), err)
    if proc is None:
        return _result(failed, out, err, started)
    if req.get("stdin"):
        threading.Thread(target=_feed, args=(proc.stdin, stdin_data), daemon=True).start()
    timeout = req.get("timeout")
    deadline = started + float(timeout) if timeout else None
    running = _Running(proc, tag, out, err, bool(req.get("stream")))
    running.pump(inp, deadline)
    running.drain()
    code = running.finish()
    after = _oom_kills()
    oom = ooms is not None and after is not None and after > ooms and code == 137
    return _result(code, out, err, started, timed_out=running.timed_out, oom_killed=oom)


def _mode_allows(info, bit):
    """Whether ``info``'s mode bits grant this process ``bit`` (4 read, 2 write) as owner,
    group or other: the file API honours a file's mode even for a root whose capabilities
    (CAP_DAC_OVERRIDE) would override it, so a file marked read-only (or unreadable) stays
    so for ``write_file`` (``read_file``) whoever runs the sandbox."""
    mode = info.st_mode
    if info.st_uid == os.geteuid():
        return bool(mode & (bit << 6))
    if info.st_gid == os.getegid() or info.st_gid in os.getgroups():
        return bool(mode & (bit << 3))
    return bool(mode & bit)


def _check_file(info, path, bit):
    """Raise as open() would for a folder, for what is not a regular file, and when its mode
    does not grant us ``bit`` (4 read, 2 write)."""
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
    if not _mode_allows(info, bit):
        raise PermissionError(errno.EACCES, "Permission denied", path)


def do_read(req):
    # O_NONBLOCK: opening a FIFO an agent planted must not hang us; only regular files.
    path = req["path"]
    limit = req.get("max_bytes")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        _check_file(info, path, 4)
        if limit is not None and info.st_size > int(limit):
            return _too_large(path, info.st_size, limit)
        chunks = []
        size = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if limit is not None and size > int(limit):  # it grew while we read it
                return _too_large(path, size, limit)
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    _write_frame({"type": "result", "size": len(data)}, data)


def _too_large(path, size, limit):
    _write_frame(
        {
            "type": "error",
            "error": "FileTooLarge",
            "message": "%s is larger than %d bytes (at least %d)" % (path, int(limit), size),
            "filename": path,
            "size": size,
        }
    )


def do_write(req, payload):
    """Write ``payload`` to ``path``. A new file is written aside and renamed into place (a
    reader never sees half of it) with ``mode`` (default 0644). An existing one is rewritten
    in place, as ``open(path, 'w')`` does: through a symlink, keeping its owner, links and
    mode (``mode`` given: set), and refused with ``PermissionError`` when its mode marks it
    read-only, and when it is not a regular file."""
    path = req["path"]
    mode = req.get("mode")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    if info is not None:
        _check_file(info, path, 2)
        # O_NONBLOCK: swapped for a FIFO since the stat, it must not hang us
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file", path)
            if mode is not None:
                os.fchmod(fd, int(mode))
            os.ftruncate(fd, 0)
            _write_fd(fd, payload)
        finally:
            os.close(fd)
        _write_frame({"type": "result"})
        return
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent)
    tmp = "%s.agentenv-%d-%d.tmp" % (path, os.getpid(), int(time.time() * 1e6))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        _write_fd(fd, payload)
        os.fchmod(fd, 0o644 if mode is None else int(mode))
    finally:
        os.close(fd)
    try:
        os.rename(tmp, path)
    except OSError:
        os.unlink(tmp)
        raise
    _write_frame({"type": "result"})


class _Bounded(object):
    """The next ``size`` bytes of the input as a file to read from (a tar, for ``untar``)."""

    def __init__(self, inp, size):
        self.inp = inp
        self.left = size

    def read(self, n=-1):
        if n is None or n < 0 or n > self.left:
            n = self.left
        if n == 0:
            return b""
        if not self.inp.buf:
            self.inp.fill()
            if not self.inp.buf:
                raise EOFError("the archive ended early")
        out = bytes(self.inp.buf[:n])
        del self.inp.buf[: len(out)]
        self.left -= len(out)
        return out

    def drain(self):
        """Skip what is left, so that the next frame is read where it starts."""
        while self.left:
            self.read(_CHUNK)


_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_LATEST = 1 << 40  # seconds: times past this (or before the epoch) are clamped, as Docker does


def _raw(text):
    """A name as the bytes the archive held: UTF-8, undecodable bytes kept as they were
    (whatever this Python's locale; 3.6 in a C locale would refuse any non-ASCII name)."""
    return text.encode("utf-8", "surrogateescape")


def _parts(name):
    """An entry's path as folder names (bytes) under the destination; refused if it leaves
    it."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith("/") or ".." in parts:
        raise ValueError("archive entry %r leaves the destination" % name)
    return [_raw(p) for p in parts]


def _times(member):
    try:
        mtime = int(member.mtime)
    except (OverflowError, ValueError):  # inf, nan
        mtime = 0
    mtime = min(max(mtime, 0), _LATEST)
    return (mtime, mtime)


class _Folders(object):
    """Descriptors of the folders on the current entry's path, each opened without
    following a symlink (so no entry is written outside the destination) and made (0755)
    where missing. Kept from entry to entry: an archive lists a folder's entries together,
    so a deep tree costs one open per folder, not one per folder per entry."""

    def __init__(self, root_fd):
        self.root_fd = root_fd
        self.names = []
        self.fds = []

    def parent(self, parts):
        """The descriptor of the folder holding ``parts[-1]`` (ours: do not close it)."""
        want = parts[:-1]
        keep = 0
        while keep < min(len(want), len(self.names)) and want[keep] == self.names[keep]:
            keep += 1
        self._drop(keep)
        for part in want[keep:]:
            at = self.fds[-1] if self.fds else self.root_fd
            try:
                fd = os.open(part, _NOFOLLOW_DIR, dir_fd=at)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=at)
                fd = os.open(part, _NOFOLLOW_DIR, dir_fd=at)
            self.names.append(part)
            self.fds.append(fd)
        return self.fds[-1] if self.fds else self.root_fd

    def _drop(self, keep):
        while len(self.fds) > keep:
            os.close(self.fds.pop())
            self.names.pop()

    def close(self):
        self._drop(0)


def _replace(name, fd, keep_dir):
    """Make room for a new entry ``name`` in folder ``fd``: a file or symlink there goes; a
    folder stays when ``keep_dir`` (a folder entry merges into it), else is refused."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(info.st_mode):
        if keep_dir:
            return True
        raise IsADirectoryError(errno.EISDIR, "a folder is in the way", name)
    os.unlink(name, dir_fd=fd)
    return False


def _give(chown, target, member, **kwargs):
    """Give an entry to the archive's owner (root only; not needed when that is us): a root
    without CAP_CHOWN is told which entry it could not give to whom."""
    if (member.uid, member.gid) == (os.geteuid(), os.getegid()):
        return
    try:
        chown(target, member.uid, member.gid, **kwargs)
    except PermissionError as e:
        raise PermissionError(
            e.errno,
            "cannot give it to %d:%d (no CAP_CHOWN)" % (member.uid, member.gid),
            member.name,
        ) from e


def _extract(tar, root_fd, as_root):
    """Write every entry of ``tar`` (streamed) under ``root_fd``: folders, regular files,
    symlinks and hard links, with their modes and times (and owners, as root); anything
    else is refused. Folders get their modes and times last, deepest first, as they may
    forbid writing into them."""
    folders = []  # type: list[tuple[list[str], object]]
    on_path = _Folders(root_fd)
    try:
        while True:
            member = tar.next()
            if member is None:
                break
            tar.members = []  # stream mode keeps every entry read: 100k entries, 60 MB
            _extract_one(tar, member, on_path, root_fd, as_root, folders)
        for parts, member in reversed(folders):  # listed parent first: children first
            parent = on_path.parent(parts)
            fd = os.open(parts[-1], _NOFOLLOW_DIR, dir_fd=parent)
            try:
                _settle(fd, member, as_root)
            finally:
                os.close(fd)
    finally:
        on_path.close()


def _settle(fd, member, as_root):
    """Give an open file or folder its entry's owner (as root), mode and times."""
    if as_root:
        _give(os.fchown, fd, member)
    os.fchmod(fd, member.mode & 0o7777)
    os.utime(fd, _times(member))


def _extract_one(tar, member, on_path, root_fd, as_root, folders):
    parts = _parts(member.name)
    if not parts:
        return  # the destination itself
    fd = on_path.parent(parts)
    name = parts[-1]
    if member.isdir():
        if not _replace(name, fd, keep_dir=True):
            os.mkdir(name, 0o700, dir_fd=fd)
        folders.append((parts, member))
        return
    _replace(name, fd, keep_dir=False)
    if member.isreg():
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        out = os.open(name, flags, 0o600, dir_fd=fd)
        try:
            src = tar.extractfile(member)
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                _write_fd(out, chunk)
            _settle(out, member, as_root)
        finally:
            os.close(out)
    elif member.issym():
        os.symlink(_raw(member.linkname), name, dir_fd=fd)
        if as_root:
            _give(os.chown, name, member, dir_fd=fd, follow_symlinks=False)
        os.utime(name, _times(member), dir_fd=fd, follow_symlinks=False)
    elif member.islnk():
        target = _parts(member.linkname)
        if not target:
            raise ValueError("hard link %r to the destination" % member.name)
        # the target's folder, opened on its own: the entry's own folder stays as it is
        targets = _Folders(root_fd)
        try:
            src_fd = targets.parent(target)
            os.link(target[-1], name, src_dir_fd=src_fd, dst_dir_fd=fd, follow_symlinks=False)
        finally:
            targets.close()
    else:
        raise ValueError("archive entry %r is not a file, folder or link" % member.name)


def do_untar(req, inp):
    """Extract the tar of ``size`` bytes that follows the request into the folder ``dest``
    (made first with ``make``), as the engine's archive upload does, but in this running
    process: no engine call, no process started. Its whole input is read even when it
    fails, so the next request starts where it should; any failure is a reply."""
    source = _Bounded(inp, int(req["size"]))
    dest = _raw(req["dest"])
    try:
        if req.get("make"):
            try:
                os.makedirs(dest)
            except FileExistsError:
                pass
        root_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY)
        try:
            import tarfile

            try:
                with tarfile.open(  # type: ignore[call-overload]  # a file-like object
                    fileobj=source, mode="r|", encoding="utf-8", errors="surrogateescape"
                ) as tar:
                    _extract(tar, root_fd, os.geteuid() == 0)
            except OSError:
                raise
            except Exception as e:  # a broken archive, or one this Python cannot take
                raise ValueError("archive not extracted: %s: %s" % (type(e).__name__, e)) from e
        finally:
            os.close(root_fd)
    finally:
        source.drain()
    _write_frame({"type": "result"})


def _write_fd(fd, payload):
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view) :]


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


def _give_back_free_memory():
    """Return the C heap's free pages to the kernel (glibc's ``malloc_trim``): compiling
    this file and importing what it needs leave about 0.7 MiB of freed heap behind, which
    every executor would otherwise hold for its whole life (hours, in a paused sandbox).
    Nothing to do where the C library has no ``malloc_trim`` (musl) or ctypes is missing."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except Exception:
        pass


def main():
    _make_undumpable()
    # Commands start with default dispositions whatever our parent left us. SIGPIPE stays
    # ignored for us (a command that stops reading its stdin must not kill the feeding
    # thread); Popen gives commands the default back.
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    _give_back_free_memory()
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
            elif op == "untar":
                do_untar(req, inp)
            elif op == "ping":
                _write_frame({"type": "result", "protocol": PROTOCOL, "pid": os.getpid()})
            else:
                raise ValueError("unknown op %r" % op)
        except UserError as e:
            _write_frame(
                {"type": "error", "error": "UserError", "reason": e.reason, "message": str(e)}
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            _write_frame(
                {
                    "type": "error",
                    "error": type(e).__name__,
                    "errno": getattr(e, "errno", None),
                    "strerror": getattr(e, "strerror", None),
                    "filename": _text(getattr(e, "filename", None)),
                    "message": str(e),
                }
            )


if __name__ == "__main__":
    main()
