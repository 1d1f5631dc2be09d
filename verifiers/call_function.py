"""call_function.py WORKDIR [UID:GID] < cases.json: call the agent's functions on given inputs
and print what each call gave, one JSON line per case. Run by an ``outputs`` check
(``python3 -I``): as root with UID:GID, the agent's user, which each case's child becomes
before anything of the agent's is loaded (so the agent's code can neither stop, trace nor
signal this process: a call that stops its parent would hold the check until the host's
timeout), and after each case every process of that user is killed (what a call left
running, stopped or forking never meets the next case); else as the agent's user itself.
The expected values never come here: the host compares.

Standard input is ``{"cases": [{"id": 0, "target": "module:function", "args": [...],
"kwargs": {...}, "timeout": 10, "keep_tuples": false, "report_args": false}, ...],
"max_result": BYTES, "total_timeout": SECONDS}``. Inputs are JSON, except that an object
with the single key ``$tuple``, ``$set``, ``$iter`` (a list) or ``$bytes`` (a string, UTF-8)
is that Python value. Cases left when ``total_timeout`` has passed are not run.

Each case runs in a child process of its own (forked, so a crash, a hang, ``os._exit`` or
state left in a module touches that case only), with the workdir appended to ``sys.path``
and as the working directory, its standard input, output and error /dev/null (the agent's
prints never reach our lines). This process never imports the agent's
code; it prints ``{"id": N, "value": V}`` (and ``"args"``: the arguments after the call, when
asked), ``{"id": N, "raised": [class names along the MRO], "message": M}`` or ``{"id": N,
"error": WHY}``. Values are made JSON-safe: tuples become lists (``{"$tuple": [...]}`` with
``keep_tuples``); anything else that JSON cannot hold is an error. The host still takes
these lines defensively: the agent's code runs as the same user and could write anything.
"""

import importlib
import json
import math
import os
import select
import signal
import sys
import time

# our sibling (who the agent's processes are, killing them): its folder only while it loads,
# so the agent's modules, found on sys.path later, are never shadowed by ours
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stop_agent

del sys.path[0]

MAX_DEPTH = 64  # the host parses no deeper
TAGS = ("$tuple", "$set", "$iter", "$bytes")
# Standard modules loaded once here, before any fork, so that each case's child need not
# import them again (the workdir is not on sys.path yet: nothing of the agent's is loaded).
PRELOAD = [
    "bisect",
    "collections",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "math",
    "operator",
    "re",
    "statistics",
    "string",
    "textwrap",
    "typing",
    "unicodedata",
]


class NotJson(Exception):
    pass


def decode(value):
    """An input as the Python value it stands for (tagged tuples, sets, iterators, bytes)."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            ((key, inner),) = value.items()
            if key == "$tuple":
                return tuple(decode(v) for v in inner)
            if key == "$set":
                return set(decode(v) for v in inner)
            if key == "$iter":
                return iter([decode(v) for v in inner])
            if key == "$bytes":
                return inner.encode("utf-8")
        return {k: decode(v) for k, v in value.items()}
    return value


def encode(value, keep_tuples, depth=0):
    """A value the agent's code returned, as plain JSON data; ``NotJson`` when it has none."""
    if depth > MAX_DEPTH:
        raise NotJson("nested deeper than %d" % MAX_DEPTH)
    if value is None or value is True or value is False:
        return value
    if isinstance(value, bool):  # a bool subclass cannot exist; kept for clarity
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        number = float.__float__(value)
        if math.isnan(number) or math.isinf(number):
            raise NotJson("%r is not a JSON number" % number)
        return number
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, tuple):
        items = [encode(v, keep_tuples, depth + 1) for v in tuple.__iter__(value)]
        return {"$tuple": items} if keep_tuples else items
    if isinstance(value, list):
        return [encode(v, keep_tuples, depth + 1) for v in list.__iter__(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in dict.items(value):
            if not isinstance(key, str):
                raise NotJson("a dict key is %s, not a string" % type(key).__name__)
            key = str.__str__(key)
            if keep_tuples and key in TAGS:
                raise NotJson("a dict key is %r, which marks a tagged value" % key)
            out[key] = encode(item, keep_tuples, depth + 1)
        return out
    raise NotJson("%s is not a JSON type" % type(value).__name__)


def describe(error):
    try:
        text = str(error)
    except BaseException:
        text = "(unprintable)"
    return text[:500]


def call(case, workdir):
    """What the call of one case gave, as a dict for its line (runs in the child)."""
    module_name, _, qualname = case["target"].partition(":")
    args = [decode(a) for a in case.get("args", [])]
    kwargs = {k: decode(v) for k, v in case.get("kwargs", {}).items()}
    try:
        target = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except BaseException as e:
        return {"error": "cannot load %s: %s: %s" % (case["target"], type(e).__name__, describe(e))}
    try:
        value = target(*args, **kwargs)
    except BaseException as e:
        try:
            names = [c.__name__ for c in type(e).__mro__ if c is not object]
        except BaseException:
            names = [type(e).__name__]
        return {"raised": [str(n) for n in names], "message": describe(e)}
    keep = bool(case.get("keep_tuples"))
    try:
        out = {"value": encode(value, keep)}
        if case.get("report_args"):
            out["args"] = encode(args, keep)
    except (NotJson, RecursionError) as e:
        return {"error": "the result is not JSON data: %s" % describe(e)}
    except BaseException as e:  # the agent's object misbehaved while being read
        return {"error": "the result cannot be read: %s: %s" % (type(e).__name__, describe(e))}
    return out


def child(case, workdir, pipe, user):
    """The forked side: become the agent's user (``user``: (uid, gid), or None) and a process
    group of its own, call, write the result, exit."""
    if user is not None:
        become(user)
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the agent's prints never reach our lines (nor fill our stderr)
        os.dup2(null, fd)
    os.close(null)
    os.chdir(workdir)
    sys.path.append(workdir)
    try:
        result = call(case, workdir)
        data = json.dumps(result, allow_nan=False).encode("utf-8")
    except BaseException as e:
        data = json.dumps({"error": "harness: %s: %s" % (type(e).__name__, describe(e))})
        data = data.encode("utf-8")
    write_all(pipe, data)
    os._exit(0)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def become(user):
    """Drop to ``user`` (uid, gid) for good, with no supplementary groups."""
    uid, gid = user
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def parse_user(text):
    """``UID[:GID]`` as (uid, gid)."""
    uid, _, gid = text.partition(":")
    return int(uid), int(gid or uid)


def kill_user(user):
    """Kill every process of ``user`` (uid, gid): ``kill(-1)`` from a child that became that
    user signals all of them in one step, stopped ones included, which a forking process
    cannot outrun; then each one left, until none is (or a second has passed)."""
    deadline = time.monotonic() + 1.0
    while stop_agent.owned_by(user[0]) and time.monotonic() < deadline:
        stop_agent.kill_as(user[0], user[1])
        for left in stop_agent.owned_by(user[0]):
            try:
                os.kill(left, signal.SIGKILL)
            except OSError:
                pass


def kill_group(pid):
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass


def fork_case(case, workdir, user):
    """Fork the child that calls one case: its pid and the read end of its result's pipe."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            child(case, workdir, write_end, user)
        finally:
            os._exit(70)
    os.close(write_end)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child did it already (or has exited)
    return pid, read_end


def read_result(pid, read_end, timeout, max_result):
    """Read what the child writes until it has exited and its pipe is drained (or closed),
    within ``timeout`` seconds and ``max_result`` bytes: (the chunks read, its wait status
    if it was reaped, the case's result when it went over either limit, else None). A
    process the call left holding the pipe open is not waited for: the child writes its
    whole result before it exits."""
    deadline = time.monotonic() + timeout
    chunks, size, status, eof, outcome = [], 0, None, False, None
    while not eof:
        if status is None:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status = code
        left = deadline - time.monotonic()
        if left <= 0:
            outcome = {"error": "timed out after %g s" % timeout}
            break
        wait = 0 if status is not None else min(left, 0.05)
        ready, _, _ = select.select([read_end], [], [], wait)
        if not ready and status is not None:
            break  # exited, and nothing more in the pipe
        if ready:
            data = os.read(read_end, 65536)
            if not data:
                eof = True
                continue
            size += len(data)
            if size > max_result:
                outcome = {"error": "the result is larger than %d bytes" % max_result}
                break
            chunks.append(data)
    return chunks, status, outcome


def parse_result(data, status):
    """The case's result from the child's bytes and wait status, or why there is none (the
    child runs the agent's code: its bytes are read as untrusted)."""
    try:
        result = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        result = None
    if isinstance(result, dict) and any(k in result for k in ("value", "raised", "error")):
        return result
    if status is not None and os.WIFSIGNALED(status):
        return {"error": "the call was killed by signal %d" % os.WTERMSIG(status)}
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    return {"error": "the call ended (exit status %s) without a result" % code}


def run_case(case, workdir, max_result, user):
    """Fork a child for one case; its result, or why there is none."""
    timeout = float(case.get("timeout", 10))
    pid, read_end = fork_case(case, workdir, user)
    chunks, status, outcome = read_result(pid, read_end, timeout, max_result)
    os.close(read_end)
    kill_group(pid)  # whatever the call left running in its group
    if status is None:
        try:
            _, status = os.waitpid(pid, 0)
        except OSError:
            pass
    if user is not None:
        kill_user(user)  # and anywhere else
    if outcome is not None:
        return outcome
    return parse_result(b"".join(chunks), status)


def main():
    workdir = sys.argv[1]
    user = parse_user(sys.argv[2]) if len(sys.argv) > 2 else None
    if user is not None and os.getuid() == user[0]:
        user = None  # already the agent's user (or a root agent): nothing to drop
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    max_result = int(request.get("max_result", 1 << 20))
    total = float(request.get("total_timeout", 300))
    end = time.monotonic() + total
    for case in request["cases"]:
        left = end - time.monotonic()
        if left <= 0:
            result = {"error": "not run: the %g s for all cases ran out" % total}
        else:
            case["timeout"] = min(float(case.get("timeout", 10)), left)
            result = run_case(case, workdir, max_result, user)
        line = {"id": case["id"]}
        for key in ("value", "args", "raised", "message", "error"):
            if key in result:
                line[key] = result[key]
        try:
            text = json.dumps(line, allow_nan=False)
        except (ValueError, TypeError, RecursionError) as e:
            text = json.dumps({"id": case["id"], "error": "unreadable result: %s" % e})
        write_all(1, (text + "\n").encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
