"""agent_call.py WORKDIR: call the agent's functions for a pytest run with ``isolation =
"process"``, one call per line of standard input, one result per line of standard output.

Started by ``agent_proxy.py`` (in the pytest process, root's) as the agent's user with
``python3 -I``; never imports the agent's code itself. Each request line is a case as
``call_function.py`` takes it (``{"id": N, "target": "module:function", "args": [...],
"kwargs": {...}, "timeout": S, "keep_tuples": true}``) and is run the same way: in a forked
child of its own, the workdir appended to ``sys.path`` and as the working directory, its
standard streams ``/dev/null``. The answer is the line ``call_function.py`` prints for it
(``{"id": N, "value": V}``, ``"raised"``/``"message"`` or ``"error"``): plain JSON values
only, so the agent's objects never reach the tests, whose comparisons run in a process the
agent's user cannot reach.

This process makes itself non-dumpable first, so the children (the agent's code, same
user) cannot open its pipes through ``/proc`` and answer for a later call. The host side
reads its lines as untrusted all the same.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out

import call_function  # our sibling, found through the line above

PR_SET_DUMPABLE = 4


def non_dumpable():
    """``prctl(PR_SET_DUMPABLE, 0)``: same-user processes can no longer open our pipes."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass  # an image without ctypes: the host still reads our lines as untrusted


def answer(line, workdir, max_result):
    """The result line for one request line."""
    try:
        case = json.loads(line.decode("utf-8"))
        if not isinstance(case, dict) or not isinstance(case.get("target"), str):
            raise ValueError("not a case")
    except (ValueError, RecursionError) as e:
        return {"id": None, "error": "bad request: %s" % e}
    # this process is the agent's user already: nothing to drop to; a call that stops or
    # outlives it is bounded by the proxy's per-call timeout in the root pytest process
    result = call_function.run_case(case, workdir, max_result, None)
    out = {"id": case.get("id")}
    for key in ("value", "raised", "message", "error"):
        if key in result:
            out[key] = result[key]
    return out


def main():
    workdir = sys.argv[1]
    max_result = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
    non_dumpable()
    for name in call_function.PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    requests = sys.stdin.buffer
    while True:
        line = requests.readline()
        if not line:
            return 0
        out = answer(line, workdir, max_result)
        try:
            text = json.dumps(out, allow_nan=False)
        except (ValueError, TypeError, RecursionError) as e:
            text = json.dumps({"id": out.get("id"), "error": "unreadable result: %s" % e})
        call_function.write_all(1, (text + "\n").encode("utf-8"))


if __name__ == "__main__":
    sys.exit(main())
