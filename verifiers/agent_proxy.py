"""The ``agent`` fixture of a pytest check with ``isolation = "process"``: the hidden tests'
only way to the agent's code. Loaded by ``run_pytest.py`` into its pytest process, which runs
as root and never imports the agent's code::

    def test_add(agent):
        assert agent.call("calc:add", 1, 2) == 3

    def test_rejects_text(agent):
        with pytest.raises(ValueError, match="not a number"):
            agent.call("calc:parse", "x")

``agent.call(target, *args, **kwargs)`` calls ``module:function`` (``module:Class.method``
too) in a process of the agent's user (``agent_call.py``, a forked child per call, its
output on ``/dev/null``) and gives back what it returned as plain data: ``None``, bools,
ints, floats, strings, lists, tuples and dicts with string keys, rebuilt here from JSON. So
a comparison in a test is between plain values made in this process: the agent's
``__eq__``, ``__hash__`` or ``__bool__`` never runs. A value that is anything else (an
object of the agent's class, a set, a generator) is not a value: the call raises
:class:`AgentCallError`, and so does a call that hangs past its timeout (10 s unless
``agent.call_with(..., timeout=S)``) or kills its process.

Arguments go the other way as JSON too (tuples, sets, frozensets and bytes are rebuilt as
such); the agent's function sees copies, so a test cannot inspect what it did to them.

When the agent's code raises, the call raises here: the built-in exception named first
along the class's MRO (``ValueError`` for the agent's ``class BadInput(ValueError)``), with
its message, and the names in ``agent_types``; :class:`AgentRaised` when no built-in
exception class is among them. :class:`AgentCallError` is a ``BaseException``: a test's
``pytest.raises(Exception)`` does not take a call that gave nothing for one that raised.

Standard library only, Python >= 3.6.
"""

import builtins
import json
import os
import select
import signal
import subprocess
import time
import types

TAGS = ("$tuple", "$set", "$iter", "$bytes")
MAX_RESULT = 1 << 20  # bytes of one call's value
SLACK_S = 5.0  # on top of a call's timeout: the fork, the import, the write


class AgentCallError(BaseException):
    """A call of the agent's code gave no value: it hung, died, or returned something that
    is not plain data. A BaseException, so ``pytest.raises(Exception)`` does not catch it."""


class AgentRaised(Exception):
    """The agent's code raised an exception that is no built-in class: ``agent_types``
    names its classes along the MRO, ``message`` is its text."""

    def __init__(self, agent_types, message):
        Exception.__init__(self, "%s: %s" % (agent_types[0] if agent_types else "?", message))
        self.agent_types = list(agent_types)
        self.message = message


def encode(value):
    """An argument as call_function.py reads it (tagged tuples, sets and bytes)."""
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$set": [encode(v) for v in value]}
    if isinstance(value, bytes):
        return {"$bytes": value.decode("utf-8")}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in TAGS:
            raise TypeError("a dict whose only key is %r cannot be passed" % next(iter(value)))
        return {str(k): encode(v) for k, v in value.items()}
    return value


def decode(value):
    """A value as the agent's code returned it: ``{"$tuple": [...]}`` is a tuple again."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and "$tuple" in value and isinstance(value["$tuple"], list):
            return tuple(decode(v) for v in value["$tuple"])
        return {k: decode(v) for k, v in value.items()}
    return value


def rebuilt(agent_types, message):
    """The exception a test sees for one the agent's code raised."""
    for name in agent_types:
        cls = getattr(builtins, str(name), None)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            continue
        try:
            error = cls(message)
            error.agent_types = list(agent_types)
        except Exception:  # a class that takes other arguments (UnicodeDecodeError)
            continue
        return error
    return AgentRaised(agent_types, message)


def as_agent(user):
    """A preexec function that drops to ``user`` (uid:gid) with no supplementary groups."""
    uid, _, gid = user.partition(":")

    def drop():
        os.setsid()
        os.setgroups([])
        os.setgid(int(gid or uid))
        os.setuid(int(uid))

    return drop


class Agent(object):
    """The agent's code, called in a process of the agent's user (see the module)."""

    def __init__(self, user, workdir, server, timeout=10.0):
        self.user = user
        self.workdir = workdir
        self.server = server  # the path of agent_call.py
        self.timeout = float(timeout)
        self.proc = None
        self.buffer = b""
        self.calls = 0

    def call(self, target, *args, **kwargs):
        """``target(*args, **kwargs)`` in the agent's process: its value as plain data."""
        return self.call_with(target, args, kwargs)

    def call_with(self, target, args=(), kwargs=None, timeout=None):
        """Like :meth:`call`, with the arguments given as a sequence and a dict, and a
        timeout of its own (seconds)."""
        timeout = self.timeout if timeout is None else float(timeout)
        self.calls += 1
        case = {
            "id": self.calls,
            "target": str(target),
            "args": encode(list(args)),
            "kwargs": encode(dict(kwargs or {})),
            "timeout": timeout,
            "keep_tuples": True,
        }
        line = (json.dumps(case, allow_nan=False) + "\n").encode("utf-8")
        got = self._exchange(line, self.calls, time.monotonic() + timeout + SLACK_S)
        if "value" in got:
            return decode(got["value"])
        if "raised" in got and isinstance(got["raised"], list):
            raise rebuilt([str(n) for n in got["raised"]], str(got.get("message", "")))
        raise AgentCallError("%s gave no value: %s" % (target, str(got.get("error", got))[:500]))

    def _start(self):
        self.proc = subprocess.Popen(
            ["python3", "-I", self.server, self.workdir, str(MAX_RESULT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={"HOME": "/tmp", "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            preexec_fn=as_agent(self.user),
            close_fds=True,
        )
        self.buffer = b""

    def _exchange(self, line, call_id, deadline):
        """Send one request and wait for the line answering it (any other is skipped)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except OSError as e:
            self.close()
            raise AgentCallError("the agent's call process is gone: %s" % e) from None
        while True:
            raw = self._line(deadline)
            try:
                got = json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError):
                continue
            if isinstance(got, dict) and got.get("id") == call_id:
                return got

    def _line(self, deadline):
        """The next line from the call process, before ``deadline``; else it is ended and
        the call is an :class:`AgentCallError`."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise AgentCallError("no answer within the call's timeout")
            if len(self.buffer) > MAX_RESULT + 65536:
                self.close()
                raise AgentCallError("an answer larger than %d bytes" % MAX_RESULT)
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if ready:
                data = os.read(fd, 65536)
                if not data:
                    self.close()
                    raise AgentCallError("the agent's call process ended without an answer")
                self.buffer += data
        raw, _, self.buffer = self.buffer.partition(b"\n")
        return raw

    def close(self):
        """End the call process and everything it left running (its session)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), proc.kill):
            try:
                kill()
            except OSError:
                pass
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        proc.wait()


def plugin(pytest, user, workdir, server):
    """A pytest plugin (a module) with the session's ``agent`` fixture."""
    module = types.ModuleType("agentenv_agent")

    def agent():
        proxy = Agent(user, workdir, server)
        try:
            yield proxy
        finally:
            proxy.close()

    module.agent = pytest.fixture(scope="session")(agent)
    return module
